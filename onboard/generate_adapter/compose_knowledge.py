"""What composition knows beyond the checkpoint, as data: config keys read only to refuse unsupported values, and
the modelling-code facts of known families that neither config.json nor the tensor names show (the only overrides).
A config key an adapter neither reads, guards, nor finds neutral (names.config_keys) becomes a kernel stub.
"""

from __future__ import annotations

# Names the block library implements, mirrored here so planning never imports torch (`onboard generate` on a
# profile stays fast); tests/generate/test_compose.py checks them against onboard.blocks.rotary / .mlp.
ROPE_TYPE_NAMES = frozenset({"default", "linear", "dynamic", "yarn", "longrope", "llama3", "proportional"})
GATED_ACTIVATION_NAMES = frozenset({"silu", "swish", "gelu_pytorch_tanh", "gelu_tanh", "gelu_new", "gelu", "relu2"})
PLAIN_ACTIVATION_NAMES = frozenset({"gelu", "gelu_pytorch_tanh", "gelu_tanh", "gelu_new", "relu2", "silu", "relu"})

# Keys read only to refuse values the blocks cannot express: key -> (field annotation, default, refusal test over
# `self` (a ModelArgs), why). Composition cannot see config values; the adapter checks them when it loads.
GUARDS: dict[str, tuple[str, str, str, str]] = {
    "scale_attn_weights": ("bool", "True", "not self.scale_attn_weights",
                           "attention scores are not scaled by 1/sqrt(head_dim)"),
    "scale_attn_by_inverse_layer_idx": ("bool", "False", "self.scale_attn_by_inverse_layer_idx",
                                        "attention scores are divided by the layer index + 1"),
    "apply_residual_connection_post_layernorm": ("bool", "False", "self.apply_residual_connection_post_layernorm",
                                                 "the residual is taken after the input norm"),
    "topk_method": ("str | None", "None",
                    "self.topk_method not in (None, 'noaux_tc', 'greedy', 'group_limited_greedy') and "
                    "1 < self.n_group and self.topk_group < self.n_group",
                    "the router's group selection is not one the MoE block computes"),
    "layer_rope_theta": ("list[float] | None", "None",
                         "self.layer_rope_theta and len(set(self.layer_rope_theta)) > 1",
                         "layers use different rotary bases"),
    "force_rope": ("bool", "False", "self.force_rope", "rotary on full-attention layers too"),
    # Gemma 4's "vision" makes only image tokens attend both ways: text, all an adapter reads, stays causal
    "use_bidirectional_attention": ("bool | str | None", "False", 'self.use_bidirectional_attention in (True, "all")',
                                    "attention is bidirectional, not causal"),
    # Laguna's config documents it, yet its transformers code never reads it: an engine honouring it computes another
    # model than the reference, so a true value is refused rather than followed or ignored
    "moe_apply_router_weight_on_input": ("bool", "False", "self.moe_apply_router_weight_on_input",
                                         "routing weights on the experts' input: transformers' code ignores it"),
    # OPT: the same tensor names for its pre-norm layers and OPT-350m's post-norm ones; 350m also projects the
    # embeddings in and out of a narrower width
    "do_layer_norm_before": ("bool", "True", "not self.do_layer_norm_before",
                             "layer norms after attention and MLP (OPT-350m's post-norm layers)"),
    "word_embed_proj_dim": ("int | None", "None", "self.word_embed_proj_dim not in (None, self.hidden_size)",
                            "token embeddings narrower than the layers (project_in / project_out)"),
    # GLM-MoE-DSA: a "shared" layer reuses the previous layer's top-k selection instead of running its indexer
    "indexer_types": ("list[str] | None", "None", 'self.indexer_types and "shared" in self.indexer_types',
                      "layers reusing a previous layer's top-k selection (indexer_types 'shared')"),
    # BLOOM: with pretraining_tp > 1 its dense projections are split into slices to mimic tensor-parallel rounding
    "slow_but_exact": ("bool", "False", "self.slow_but_exact", "the output projections summed in pretraining_tp "
                       "slices (slow_but_exact)"),
    # Cohere2-MoE
    "expert_selection_fn": ("str", '"softmax"', 'self.expert_selection_fn not in ("softmax", "sigmoid")',
                            "a router scoring the MoE block does not compute"),
    "shared_expert_combination_strategy": ("str", '"sum"', 'self.shared_expert_combination_strategy not in '
                                           '("sum", "average")', "shared experts combined another way"),
    # DBRX: the top-k weights divided by their p-norm; p = 1 is a renormalisation by the sum (norm_topk_prob)
    "moe_normalize_expert_weights": ("float | None", "1.0", "self.moe_normalize_expert_weights not in (1, 1.0)",
                                     "expert weights normalised by a p-norm other than the sum (p = 1)"),
    "prefix_dense_sliding_window_pattern": ("int", "1", 'self.prefix_dense_sliding_window_pattern == 1 and "dense" '
                                            'in (self.mlp_layer_types or ())', "rotary on the dense prefix layers' "
                                            "full attention too (force_rope)"),
    # MPT's attn_config (read as the model's own keys: config_view.MODEL_SECTIONS). The block's ALiBi slopes are
    # BLOOM's, which equal MPT's at its default maximum of 8 (for any head count); transformers' MPT builds multi-head
    # attention, LayerNorm and causal masks whatever these keys say, so values asking otherwise are refused.
    "alibi_bias_max": ("int", "8", "self.alibi_bias_max != 8", "ALiBi slopes from another maximum than 8"),
    "attn_type": ("str", '"multihead_attention"', 'self.attn_type != "multihead_attention"',
                  "multi-query or grouped-query attention in MPT's fused Wqkv"),
    "norm_type": ("str", '"low_precision_layernorm"',
                  'self.norm_type not in ("layernorm", "low_precision_layernorm", "layer_norm")',
                  "a norm other than LayerNorm"),
    "prefix_lm": ("bool", "False", "self.prefix_lm", "bidirectional attention over a prefix"),
    "qk_ln": ("bool", "False", "self.qk_ln", "LayerNorm on queries and keys"),
    "softmax_scale": ("float | None", "None", "self.softmax_scale is not None",
                      "attention scores scaled by softmax_scale instead of 1/sqrt(head_dim)"),
}  # fmt: skip
GUARD_FIELDS = {
    "topk_method": (("n_group", "int", "1"), ("topk_group", "int", "1")),
    "prefix_dense_sliding_window_pattern": (("mlp_layer_types", "list[str] | None", "None"),),
}
"""Other fields a guard's test reads."""

# Modelling-code facts of known families that config.json and the tensor names do not show, each a reading of the
# family's transformers code checked by parity on its tiny checkpoint. A day-zero family gets none.
FAMILY_FACTS: dict[str, dict[str, object]] = {
    # rotary on interleaved (even, odd) pairs: rotate_every_two / x[..., ::2] in their modelling code
    **dict.fromkeys(("gptj", "glm", "helium", "glm4", "ernie4_5", "cohere", "ernie4_5_moe"),
                    {"rope_interleaved": True}),
    # ... and only on sliding-window layers (full-attention layers are NoPE): the layer's rope kind as an expression
    "cohere2": {"rope_interleaved": True, "rope_kind": "layer_type if layer_type == SLIDING else None"},
    # Beam's layers without rotary scale their queries by (1 + (position + 1) / 2048) ** 0.1 (constants of its code)
    "beam": {"nope_query_scale": (2048.0, 0.1)},
    # Llama 4: rotary as complex products of (even, odd) pairs; an L2 norm without weight on q and k after the rotary
    # embedding, on the rotary layers only and only with use_qk_norm (Llama4TextL2Norm, no tensor shows it); each
    # expert reads its sigmoid routing weight times the token (Llama4TextMoe: routed_in = x * router_scores), the
    # chosen weights not renormalised
    "llama4_text": {"rope_interleaved": True, "weightless_qk_norm": "rotary layers, use_qk_norm",
                    "qk_norm_after_rope": True, "moe_weights_on_input": True, "norm_topk_prob": False},
    # Jamba's router keeps the top-k softmax weights as they are (no norm_topk_prob key says so)
    "jamba": {"norm_topk_prob": False},
    "cohere2_moe": {"rope_interleaved": True, "rope_kind": "layer_type if layer_type == SLIDING else None"},
    # OlmoLayerNorm: F.layer_norm without weight or bias (eps 1e-5) before attention and MLP, and before the head
    "olmo": {"weightless_norms": "pre"},
    # A.X-K1's post_mlp_layernorm normalises its MoE layers' output; the released checkpoints store one for the
    # dense layers too, which the code never applies (_keys_to_ignore_on_load_unexpected)
    "axk1": {"moe_output_norm": True},
    # NanoChat: weightless RMSNorms (also on the embeddings before layer 0, and on q/k after the rotary embedding),
    # and rotate_half as [x2, -x1] (the rotation by -angle)
    "nanochat": {"weightless_norms": "pre", "embedding_norm": True, "weightless_qk_norm": True,
                 "qk_norm_after_rope": True, "rope_inverted": True},
    # only sliding-window layers are rotary (FlintAttention applies rope when its layer has a window; AFMoE when
    # is_local_attention)
    **dict.fromkeys(("flint", "afmoe"), {"rope_kind": "layer_type if layer_type == SLIDING else None"}),
    # full-attention layers are NoPE once a sliding window is configured (as the registered exaone4)
    **dict.fromkeys(("exaone_moe", "exaone4"),
                    {"rope_kind": "layer_type if args.sliding_window is None or layer_type == SLIDING else None"}),
    # SwiGLU fixed in the code (no hidden_act key), and model.embedding_norm applied after the last layer
    **dict.fromkeys(("lfm2", "lfm2_moe", "lfm3"), {"hidden_act": "silu", "embedding_norm_is_final": True}),
    # sparsemixer top-2 routing (extra_blocks.SparseMixerMoE): the router tensor is a plain gate, only the code says
    "phimoe": {"moe_router": "sparsemixer"},
    # experts stored [E, hidden, 2I] with gate and up in alternating columns, biases, a clamped SwiGLU (up + 1)
    "gpt_oss": {"moe_experts": "gpt_oss"},
    "gpt_neo": {"attention_scale": "1.0"},  # GPTNeoSelfAttention multiplies q·k by no scale
    # learned positions looked up at position + 2 (OPTLearnedPositionalEmbedding, BioGptLearnedPositionalEmbedding)
    "opt": {"position_offset": 2},
    # XGLM: fixed sinusoidal positions (XGLMSinusoidalPositionalEmbedding, a non-persistent buffer) at row p + 2
    "xglm": {"sinusoidal_positions": 2},
    # ... and LayerNorms built as nn.LayerNorm(dim): eps 1e-5 whatever config.json's layer_norm_eps says
    "biogpt": {"position_offset": 2, "norm_eps": 1e-5},
    # `query_key_value` rows: grouped per KV head ([q heads of the group; k; v]) or plain [all q; all k; all v].
    # Only one KV head makes both the same; otherwise the names and shapes cannot tell.
    **dict.fromkeys(("gpt_neox", "persimmon", "falcon", "gpt_neox_japanese"), {"query_key_value": "grouped"}),
    # bloom_gelu_forward: the tanh approximation, fixed in the code (no hidden_act key)
    "bloom": {"query_key_value": "grouped", "hidden_act": "gelu_pytorch_tanh"},
    # MPT: MptMLP's nn.GELU(approximate="none"); its config names no activation
    "mpt": {"hidden_act": "gelu"},
    # OLMo-hybrid: its Gated DeltaNet's gated norm is FLA's FusedRMSNormGated at eps 1e-5, not rms_norm_eps
    "olmo_hybrid": {"deltanet_norm_eps": 1e-5},
    # param2moe: sarvam_moe's checkpoint names, split [q; k; v] at load
    **dict.fromkeys(("sarvam_moe", "param2moe"), {"query_key_value": "concat"}),
    # QK-norm applied to the rotated heads: apply_rotary_pos_emb, then query_layernorm / key_layernorm
    **dict.fromkeys(("hunyuan_v1_dense", "hunyuan_v1_moe"), {"qk_norm_after_rope": True}),
    # experts ranked by raw router logits + bias, weighted by the sigmoid of the chosen logits
    "kolibri1": {"router_select_by": "logits"},
    # Kolibri 1.1 keeps Kolibri 1's router and adds sparse layers (`stubs`: every mechanism the blocks lack)
    "kolibri1_1": {"router_select_by": "logits", "stubs": (
        ("indexed_attention", "indexed_attention layers: a weightless indexer (ReLU scores of the first "
         "index_num_heads query heads against key head 0) picks each query's index_topk keys from a pool of "
         "index_compression-sized blocks, plus index_num_sink_tokens first and index_num_local_tokens last keys; "
         "sparse key selection is not in the block library"),
        ("kv_shared_layers", "later indexed layers have no k/v projections and attend over an earlier layer's "
         "keys and values (kv_source_layers): cross-layer K/V sharing is not in the block library"),
    )},
    # Ergo: the attention (fused wqkv, wo) and norms map to blocks; these parts of its modelling code do not
    "ergo": {"stubs": (
        ("residual_gate", "each post-normed branch joins the residual through a learned per-dimension gate w: "
         "sigmoid(w) * branch + sqrt(1 + sigmoid(w)) * exp(-softplus(w) / 2) * residual (post_attention_residual, "
         "post_ffn_residual): not a residual of the block library"),
        ("expert_output_norm", "an RMSNorm with one weight per expert on every routed expert's output "
         "(expert_output_norm) and one on the shared expert's (shared_expert_output_norm): not in the MoE block"),
        ("ungated_experts", "ReLU^2 experts without a gate projection, stored [experts, in, out], and a router "
         "stored [hidden, experts] (gate_kernel): the MoE block reads gated experts"),
    )},
    "deepseek_v2": {"mla_rope_interleave": True},  # complex-number rotary on interleaved pairs
    # DeepseekV3TopkRouter always ranks bias-corrected sigmoid scores in groups: released configs' topk_method
    # (noaux_tc) names that, and transformers' code never reads it
    "deepseek_v3": {"ignored_keys": ("topk_method",)},
    # DeepSeek Sparse Attention: MLA's rotary on interleaved pairs always (no rope_interleave key); the indexer's
    # rotary half-split (DeepSeek-V3.2) or interleaved (GLM-MoE-DSA)
    "deepseek_v32": {"mla_rope_interleave": True},
    "glm_moe_dsa": {"mla_rope_interleave": True, "indexer_rope_interleaved": True},
    # dots.llm3 (Dots3Note): GLM-MoE-DSA's rotary layout, plus the normed q / kv latents scaled by sqrt(hidden / rank)
    # and the latent norms at rms_norm_eps (its code), and sigmoid(g_proj(x)) gating each head's output
    "dots3_note_text": {"mla_rope_interleave": True, "indexer_rope_interleaved": True, "mla_latent_scale": True,
                        "mla_latent_norm_eps": "config", "attention_gate_fn": "sigmoid"},
    # qkv_proj rows in mp_num=4 blocks of [q, v, k] (its modelling code): the loader's codegen_qkv op reorders them
    "codegen": {"qkv_layout": "codegen", "rope_interleaved": True},  # rotate_every_two, as GPT-J
    # Laguna: the attention output gated by softplus(g_proj(x)), one value per head; sigmoid-scored experts ranked
    # with a correction bias from router logits computed in the activations' dtype
    "laguna": {"attention_gate_fn": "softplus"},
    # Gemma 4: q·k unscaled (its q_norm and k_norm set the scale: scaling = 1.0), and the values RMS-normalised
    # without a weight (v_norm, with_scale=False: no tensor shows it)
    **dict.fromkeys(("gemma4_unified_text", "gemma4_text"), {"attention_scale": "1.0", "v_norm": True}),
}  # fmt: skip

# Config keys that switch a bias in a family's modelling code: key -> the projection groups (qkv, o, mlp, head, mla)
# whose bias it switches. A composed adapter then reads the key, so the family's committed adapter serves its
# checkpoints with and without those biases; elsewhere the tensors decide.
_ATTENTION_BIAS = {"attention_bias": "qkv o"}
BIAS_SWITCHES: dict[str, dict[str, str]] = {
    **dict.fromkeys(("llama", "granite", "smollm3"), {**_ATTENTION_BIAS, "mlp_bias": "mlp"}),
    **dict.fromkeys(("qwen3", "qwen3_moe", "gemma", "gemma2", "gemma3_text", "olmo2", "olmoe", "cohere", "apertus",
                     "gpt_oss", "granitemoe"), _ATTENTION_BIAS),
    **dict.fromkeys(("starcoder2", "ernie4_5"), {"use_bias": "qkv o mlp"}),
    "glm4": {"attention_bias": "qkv"},  # Glm4Attention: o_proj has no bias whatever attention_bias says
    "phimoe": {**_ATTENTION_BIAS, "lm_head_bias": "head"},
    "deepseek_v3": {"attention_bias": "mla"},
}  # fmt: skip
for _family, _switches in BIAS_SWITCHES.items():  # a new dict: families may share one above
    FAMILY_FACTS[_family] = {**FAMILY_FACTS.get(_family, {}), "bias_switches": _switches}
