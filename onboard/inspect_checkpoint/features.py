"""The feature vocabulary: short names for what a model does beyond a plain pre-norm decoder, how a checkpoint is
compared with known families ("qwen3 + attention_sinks"). `FEATURES` documents each name; `derive` computes them.
"""

from __future__ import annotations

from onboard.inspect_checkpoint.architecture import ArchFacts
from onboard.profile import quantized_feature, rope_feature

FEATURES: dict[str, str] = {
    "gqa": "grouped-query attention: 1 < kv heads < attention heads",
    "mqa": "multi-query attention: one KV head shared by all attention heads",
    "mla": "multi-head latent attention (DeepSeek): low-rank compressed KV",
    "sliding_window": "some or all attention layers see only the last `window` tokens",
    "interleaved_attention": "layers of different mixer kinds alternate (sliding/full, linear/full, SSM/attention)",
    "chunked_attention": "local attention within fixed chunks (Llama 4)",
    "nope_layers": "some attention layers apply no rotary embedding",
    "no_positions": "no positional encoding at all: position_embedding_type says none (Granite-4.0's hybrids)",
    "moe": "mixture-of-experts MLP in some or all layers",
    "shared_experts": "MoE layers also run always-on shared experts",
    "dense_first_layers": "the first layers keep a dense MLP before MoE layers start",
    "router_correction_bias": "a bias added to router scores for expert selection only (DeepSeek-V3 noaux_tc)",
    "sigmoid_router": "router scores with a sigmoid instead of a softmax",
    "qk_norm": "queries and keys are normalised before attention",
    "attention_sinks": "a learned per-head sink logit joins the attention softmax (gpt-oss)",
    "attn_softcap": "attention logits soft-capped with cap·tanh(x/cap)",
    "final_softcap": "output logits soft-capped",
    "tied_embeddings": "the output layer reuses the input embedding matrix",
    "linear_attention": "linear-attention / delta-rule layers with a fixed state",
    "ssm": "state-space (Mamba) layers with a fixed state",
    "short_conv": "short convolution mixer layers (LFM2)",
    "multimodal": "vision or audio towers present besides the language model",
    "mtp": "multi-token-prediction layers shipped with the checkpoint",
    "logit_scaling": "final logits multiplied by a constant (Cohere logit_scale, Granite logits_scaling)",
    "embedding_scaling": "token embeddings multiplied by a constant (Gemma sqrt(hidden), Granite)",
    "residual_scaling": "residual branches multiplied by a constant (Granite, MiniCPM)",
    "attention_multiplier": "attention scores use a configured scale instead of 1/sqrt(head_dim)",
    "query_pre_attn_scalar": "attention scale from query_pre_attn_scalar (Gemma 2/3)",
    "nope_temperature": "queries of the layers without rotary scaled up with the position (Llama 4's temperature "
    "tuning)",
    "kv_shared_layers": "layers attending over an earlier layer's keys and values, caching none (Gemma 3n / 4)",
    "double_wide_mlp": "the KV-shared layers' MLP twice as wide (Gemma 4's use_double_wide_mlp)",
    "values_from_keys": "no value projection on some layers: the keys are the values (Gemma 4's attention_k_eq_v)",
    "bidirectional_attention": "attention sees later tokens too (use_bidirectional_attention): not a causal LM",
    "per_layer_embeddings": "a second token table with one vector per layer, gated into each layer (Gemma 3n / 4)",
    "moe_beside_mlp": "routed experts beside each layer's dense MLP, summed (Gemma 4's enable_moe_block)",
    "query_heads_per_layer": "layers with different query head counts (Laguna's num_attention_heads_per_layer)",
    "attention_output_gate": "the attention output gated per head or channel before o_proj (Laguna's gating)",
    "router_softcap": "router logits soft-capped by tanh before scoring (Laguna's moe_router_logit_softcapping)",
    "head_transform": "a dense, activation and norm before the LM head's projection (ModernBERT-decoder)",
    "norm_offset": "RMSNorm weight applied as (1 + w) (Gemma, Qwen3-Next)",
    "layernorm": "LayerNorm (mean-centred) instead of RMSNorm",
    "sandwich_norm": "norms both before and after each sub-block (Gemma 2/3)",
    "post_norm": "norms after each sub-block only (OLMo 2)",
    "post_ln_norm": "norms on the residual sums, norm(x + f(x)), and none after the last layer (GPT-1, OPT-350m)",
    "parallel_residual": "attention and MLP computed in parallel from one normed input",
    "partial_rotary": "rotary embedding on part of each head only",
    "qkv_bias": "bias on the query/key/value projections",
    "alibi": "ALiBi attention biases instead of rotary positions",
    "absolute_positions": "learned absolute position embeddings",
    "plain_mlp": "non-gated two-layer MLP",
    "rope:<type>": "rotary embedding of the given type: default, linear, dynamic, yarn, llama3, longrope, …",
    "quantized:<method>": "checkpoint weights quantized with the given method (fp8, mxfp4, gptq, awq, …)",
}


def derive(facts: ArchFacts) -> tuple[str, ...]:
    d, m, moe, norms, rope = facts.dims, facts.multipliers, facts.moe, facts.norms, facts.rope
    kinds = [layer.attention for layer in facts.layers]
    attention = ("full", "sliding", "chunked", "mla")
    grouped = "mla" not in kinds and any(k in attention for k in kinds) and d.num_attention_heads > 1
    position = None if rope else facts.position_encoding
    on: dict[str, object] = {  # in the order the profile lists them
        "mla": "mla" in kinds,
        "mqa": grouped and d.num_kv_heads == 1,
        "gqa": grouped and 1 < d.num_kv_heads < d.num_attention_heads,
        "sliding_window": "sliding" in kinds,
        "chunked_attention": "chunked" in kinds,
        "interleaved_attention": len({k for k in kinds if k != "none"}) > 1,
        "nope_layers": facts.position_encoding == "rope"
        and any(not layer.rope for layer in facts.layers if layer.attention in attention),
        "linear_attention": "linear" in kinds,
        "ssm": "ssm" in kinds or any(layer.parallel_ssm for layer in facts.layers),
        "short_conv": "conv" in kinds,
        "moe": moe is not None,
        "shared_experts": moe and moe.num_shared_experts,
        "dense_first_layers": moe and moe.dense_first_layers,
        "router_correction_bias": moe and moe.correction_bias,
        "sigmoid_router": moe and moe.scoring == "sigmoid",
        "qk_norm": norms.qk_norm,
        "attention_sinks": facts.attention_sinks,
        "attn_softcap": m.attn_logit_softcapping,
        "final_softcap": m.final_logit_softcapping,
        "tied_embeddings": facts.tie_word_embeddings,
        "multimodal": facts.multimodal,
        "mtp": facts.mtp_layers,
        "logit_scaling": m.logit_scale not in (None, 1.0),
        "embedding_scaling": m.embedding_multiplier not in (None, 1.0),
        "residual_scaling": m.residual_multiplier not in (None, 1.0),
        "attention_multiplier": m.attention_multiplier is not None,
        "query_pre_attn_scalar": m.query_pre_attn_scalar is not None,
        "nope_temperature": m.nope_temperature is not None and any(not layer.rope for layer in facts.layers),
        "norm_offset": norms.offset,
        "layernorm": norms.kind == "layernorm",
        "sandwich_norm": norms.placement == "sandwich",
        "post_norm": norms.placement == "post",
        "post_ln_norm": norms.placement == "post_ln",
        "parallel_residual": facts.parallel_residual,
        rope_feature(rope.type) if rope else "rope": rope is not None,
        "partial_rotary": rope and (rope.partial_rotary_factor < 1.0 or (rope.rotary_dim or d.head_dim) < d.head_dim),
        "alibi": position == "alibi",
        "absolute_positions": position == "absolute",
        "no_positions": position == "nope",
        "qkv_bias": facts.biases.attention_qkv,
        "plain_mlp": facts.mlp_gated is False,
        quantized_feature(facts.quantization.method) if facts.quantization else "quantized": facts.quantization,
    }
    head = ["head_transform"] if facts.head_transform else []
    return (*(name for name, flag in on.items() if flag), *facts.layer_options, *head)
