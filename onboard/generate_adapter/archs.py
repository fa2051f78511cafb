"""What each supported family's adapter is made of, as data the adapter template renders.

Each `ArchSpec` names the ModelArgs fields (config.json keys, HF defaults), the per-layer rules (attention kind,
rope kind, MoE or dense) and the block constructors as Python expressions over `args`, `i` (layer index),
`layer_type` and `window`. The template turns them into `adapters/<model_type>.py`; the parity harness proves
each against transformers. Families differ in data here, never in if-chains in the template.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Fields almost every decoder config has: (name, annotation, default repr or None when required).
BASE_FIELDS: tuple[tuple[str, str, str | None], ...] = (
    ("hidden_size", "int", None),
    ("num_hidden_layers", "int", None),
    ("num_attention_heads", "int", None),
    ("vocab_size", "int", None),
    ("intermediate_size", "int", None),
    ("num_key_value_heads", "int | None", "None"),
    ("head_dim", "int | None", "None"),
    ("max_position_embeddings", "int", "2048"),
    ("rms_norm_eps", "float", "1e-06"),
    ("hidden_act", "str", '"silu"'),
    ("tie_word_embeddings", "bool", "False"),
    ("rope_parameters", "dict[str, Any] | None", "None"),
    ("rope_scaling", "dict[str, Any] | None", "None"),
    ("rope_theta", "float | None", "None"),
    ("partial_rotary_factor", "float | None", "None"),
    ("sliding_window", "int | None", "None"),
    ("layer_types", "list[str] | None", "None"),
)


def attention(*extra: str, mla: bool = False) -> str:
    """The standard Attention constructor with extra keyword arguments ("name=expr")."""
    head = "Attention(args.hidden_size, args.num_attention_heads, args.num_key_value_heads, args.head_dim"
    return head + "".join(f", {e}" for e in extra) + ")"


GATED = "GatedMLP(args.hidden_size, args.intermediate_size, args.hidden_act{bias})"
GEMMA_GATED = "GatedMLP(args.hidden_size, args.intermediate_size, args.hidden_activation)"
BIASED = ("qkv_bias=args.attention_bias", "o_bias=args.attention_bias")
SLIDING_ATTN = "sliding_window=window"
QK_HEAD = "qk_norm=QKNormSpec(args.rms_norm_eps)"
SLIDING_IF_WINDOW = "SLIDING if self.sliding_window else FULL"
QWEN_SLIDING = "SLIDING if self.use_sliding_window and self.sliding_window and i >= self.max_window_layers else FULL"
QWEN_SPARSE = "i not in self.mlp_only_layers and self.num_experts > 0 and (i + 1) % self.decoder_sparse_step == 0"
GEMMA_NORMS = ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm")
GEMMA_FIELDS = (
    ("tie_word_embeddings", "bool", "True"),
    ("attention_bias", "bool", "False"),
    ("hidden_activation", "str", '"gelu_pytorch_tanh"'),
    ("query_pre_attn_scalar", "float", "256"),
)
GRANITE_FIELDS = (
    ("attention_bias", "bool", "False"),
    ("embedding_multiplier", "float", "1.0"),
    ("residual_multiplier", "float", "1.0"),
    ("attention_multiplier", "float", "1.0"),
    ("logits_scaling", "float", "1.0"),
)
GRANITE_FEATURES = frozenset({"embedding_scaling", "residual_scaling", "attention_multiplier", "logit_scaling"})
QWEN_FIELDS = (
    ("use_sliding_window", "bool", "False"),
    ("max_window_layers", "int", "28"),
)
QWEN_MOE_FIELDS = (
    ("num_experts", "int", None),
    ("num_experts_per_tok", "int", None),
    ("moe_intermediate_size", "int", None),
    ("norm_topk_prob", "bool", "False"),
    ("decoder_sparse_step", "int", "1"),
    ("mlp_only_layers", "list[int]", "field(default_factory=list)"),
)


@dataclass(frozen=True)
class ArchSpec:
    model_type: str
    summary: str
    """One line: what the model is, in block terms (goes into the adapter's docstring)."""
    attention: str
    mlp: str
    norm: str = "RMSNorm(dim, args.rms_norm_eps)"
    placement: str = "pre"
    """pre | post | sandwich | parallel: see templates/adapter.py.j2 `forward`."""
    norm_names: tuple[str, ...] = ("input_layernorm", "post_attention_layernorm")
    mlp_attr: str = "mlp"
    fields: tuple[tuple[str, str, str | None], ...] = ()
    """Extra ModelArgs fields, or BASE_FIELDS entries with a family default."""
    aliases: dict[str, tuple[str, ...]] = field(default_factory=dict)
    layer_type: str = "FULL"
    """Default per-layer attention type when config.json has no `layer_types` (expression over self, i)."""
    moe_layer: str | None = None
    """Expression over self, i: True where layer i has the MoE block (None: no MoE switch)."""
    rope_kind: str = "FULL"
    """Which rotary table layer i uses: FULL, layer_type (per-type bases), None (NoPE), or an expression."""
    rotary_head_dim: str | None = None
    embed_scale: str = "None"
    lm_head: tuple[str, ...] = ()
    residual_scale: str | None = None
    post_init: tuple[str, ...] = ()
    """Statements run first in ModelArgs.__post_init__: derived defaults, refusals of config values the blocks
    cannot express."""
    features: frozenset[str] = frozenset()
    """Profile features this adapter implements (beyond gqa/mqa/tied embeddings/rope types)."""
    dropped: tuple[str, ...] = ()


def _spec(model_type: str, summary: str, attention_expr: str, mlp: str, **kw) -> ArchSpec:
    feats = frozenset(kw.pop("features", ()))
    return ArchSpec(model_type, summary, attention_expr, mlp, features=feats, **kw)


LLAMA = _spec(
    "llama", "pre-norm decoder: RMSNorm, GQA attention with rotary (any HF rope type), SwiGLU MLP",
    attention(*BIASED), GATED.format(bias=", bias=args.mlp_bias"),
    fields=(("attention_bias", "bool", "False"), ("mlp_bias", "bool", "False")),
    features={"qkv_bias"},
)  # fmt: skip

ARCHS: dict[str, ArchSpec] = {
    "llama": LLAMA,
    "mistral": _spec(
        "mistral",
        "llama + sliding-window attention on every layer when `sliding_window` is set",
        attention(SLIDING_ATTN),
        GATED.format(bias=""),
        layer_type=SLIDING_IF_WINDOW,
        features={"sliding_window"},
    ),
    "mixtral": _spec(
        "mixtral",
        "mistral with a softmax top-k MoE (renormalised) in every layer",
        attention(SLIDING_ATTN),
        "MoE(args.hidden_size, args.num_local_experts, args.intermediate_size, "
        "RouterSpec(top_k=args.num_experts_per_tok), activation=args.hidden_act)",
        mlp_attr="block_sparse_moe",
        layer_type=SLIDING_IF_WINDOW,
        fields=(("num_local_experts", "int", None), ("num_experts_per_tok", "int", None)),
        features={"sliding_window", "moe"},
    ),
    "qwen2": _spec(
        "qwen2",
        "llama + q/k/v biases; sliding window on layers >= max_window_layers when enabled",
        attention("qkv_bias=True", SLIDING_ATTN),
        GATED.format(bias=""),
        layer_type=QWEN_SLIDING,
        fields=QWEN_FIELDS,
        features={"qkv_bias", "sliding_window"},
    ),
    "qwen2_moe": _spec(
        "qwen2_moe",
        "qwen2 with a softmax MoE plus a sigmoid-gated shared expert (dense on mlp_only_layers)",
        attention("qkv_bias=args.qkv_bias", SLIDING_ATTN),
        "MoE(args.hidden_size, args.num_experts, args.moe_intermediate_size, RouterSpec(top_k=args.num_experts_per_tok, "
        "norm_topk_prob=args.norm_topk_prob), activation=args.hidden_act, shared_intermediate_size="
        "args.shared_expert_intermediate_size, shared_gate=True) if args.is_moe_layer(i) else " + GATED.format(bias=""),
        layer_type=QWEN_SLIDING,
        moe_layer=QWEN_SPARSE,
        fields=QWEN_FIELDS
        + QWEN_MOE_FIELDS
        + (("shared_expert_intermediate_size", "int", "0"), ("qkv_bias", "bool", "True")),
        aliases={"num_experts": ("num_local_experts",)},
        features={"qkv_bias", "sliding_window", "moe", "shared_experts"},
    ),
    "qwen3": _spec(
        "qwen3",
        "llama + per-head RMS QK-norm before rotary; optional sliding window like qwen2",
        attention(*BIASED, SLIDING_ATTN, QK_HEAD),
        GATED.format(bias=""),
        layer_type=QWEN_SLIDING,
        fields=QWEN_FIELDS + (("attention_bias", "bool", "False"),),
        features={"qk_norm", "sliding_window"},
    ),
    "qwen3_moe": _spec(
        "qwen3_moe",
        "qwen3 attention with a softmax top-k MoE (no shared expert; dense on mlp_only_layers)",
        attention(*BIASED, SLIDING_ATTN, QK_HEAD),
        "MoE(args.hidden_size, args.num_experts, args.moe_intermediate_size, RouterSpec(top_k=args.num_experts_per_tok, "
        "norm_topk_prob=args.norm_topk_prob), activation=args.hidden_act) if args.is_moe_layer(i) else "
        + GATED.format(bias=""),
        layer_type=QWEN_SLIDING,
        moe_layer=QWEN_SPARSE,
        fields=QWEN_FIELDS + QWEN_MOE_FIELDS + (("attention_bias", "bool", "False"),),
        aliases={"num_experts": ("num_local_experts",)},
        features={"qk_norm", "sliding_window", "moe"},
    ),
    "gemma": _spec(
        "gemma",
        "llama with (1 + w) RMSNorm, sqrt(hidden)-scaled embeddings, tanh-GeGLU MLP, tied head",
        attention(*BIASED),
        GATED.format(bias=""),
        norm="RMSNorm(dim, args.rms_norm_eps, offset=1.0)",
        embed_scale="args.hidden_size**0.5",
        fields=(
            ("tie_word_embeddings", "bool", "True"),
            ("attention_bias", "bool", "False"),
            ("hidden_act", "str", '"gelu_pytorch_tanh"'),
        ),
        aliases={"hidden_act": ("hidden_activation",)},
        features={"norm_offset", "embedding_scaling"},
    ),
    "gemma2": _spec(
        "gemma2",
        "gemma with sandwich norms, alternating sliding/full layers, attention and final logit "
        "soft-capping and a query_pre_attn_scalar attention scale",
        attention(
            *BIASED, SLIDING_ATTN, "scale=args.query_pre_attn_scalar**-0.5", "softcap=args.attn_logit_softcapping"
        ),
        GEMMA_GATED,
        norm="RMSNorm(dim, args.rms_norm_eps, offset=1.0)",
        placement="sandwich",
        norm_names=GEMMA_NORMS,
        embed_scale="args.hidden_size**0.5",
        layer_type="SLIDING if i % 2 == 0 else FULL",
        lm_head=("final_softcap=args.final_logit_softcapping",),
        fields=GEMMA_FIELDS
        + (("attn_logit_softcapping", "float | None", "None"), ("final_logit_softcapping", "float | None", "None")),
        features={
            "norm_offset",
            "embedding_scaling",
            "sandwich_norm",
            "sliding_window",
            "attn_softcap",
            "final_softcap",
            "query_pre_attn_scalar",
        },
    ),
    "gemma3_text": _spec(
        "gemma3_text",
        "gemma2 with (1 + w) QK-norm, 5:1 sliding/full layers with a separate rope base for sliding "
        "layers, no attention soft-capping by default",
        attention(
            *BIASED,
            SLIDING_ATTN,
            "scale=args.query_pre_attn_scalar**-0.5",
            "softcap=args.attn_logit_softcapping",
            "qk_norm=QKNormSpec(args.rms_norm_eps, offset=1.0)",
        ),
        GEMMA_GATED,
        norm="RMSNorm(dim, args.rms_norm_eps, offset=1.0)",
        placement="sandwich",
        norm_names=GEMMA_NORMS,
        embed_scale="args.hidden_size**0.5",
        layer_type="SLIDING if (i + 1) % self.sliding_window_pattern else FULL",
        rope_kind="layer_type",
        lm_head=("final_softcap=args.final_logit_softcapping",),
        fields=GEMMA_FIELDS
        + (
            ("attn_logit_softcapping", "float | None", "None"),
            ("final_logit_softcapping", "float | None", "None"),
            ("sliding_window_pattern", "int", "6"),
            ("rope_local_base_freq", "float | None", "None"),
        ),
        aliases={"sliding_window_pattern": ("_sliding_window_pattern",)},
        features={
            "norm_offset",
            "embedding_scaling",
            "sandwich_norm",
            "sliding_window",
            "qk_norm",
            "attn_softcap",
            "final_softcap",
            "query_pre_attn_scalar",
        },
    ),
    "phi3": _spec(
        "phi3",
        "llama with fused qkv_proj / gate_up_proj in the checkpoint, partial rotary and longrope; "
        "sliding window on every layer when set",
        attention(SLIDING_ATTN),
        GATED.format(bias=""),
        layer_type=SLIDING_IF_WINDOW,
        fields=(("original_max_position_embeddings", "int | None", "None"),),
        features={"sliding_window", "partial_rotary"},
    ),
    "phimoe": _spec(
        "phimoe",
        "mixtral-like MoE with sparsemixer top-2 routing, LayerNorm (with bias), optional q/k/v/o and LM-head biases",
        attention(*BIASED, SLIDING_ATTN),
        "SparseMixerMoE(args.hidden_size, args.num_local_experts, args.intermediate_size, args.router_jitter_noise, "
        "activation=args.hidden_act)",
        norm="LayerNorm(dim, args.rms_norm_eps)",
        mlp_attr="block_sparse_moe",
        layer_type=SLIDING_IF_WINDOW,
        lm_head=("bias=args.lm_head_bias",),
        fields=(
            ("num_local_experts", "int", None),
            ("num_experts_per_tok", "int", "2"),
            ("router_jitter_noise", "float", "0.01"),
            ("attention_bias", "bool", "False"),
            ("lm_head_bias", "bool", "False"),
            ("original_max_position_embeddings", "int | None", "None"),
        ),
        post_init=(
            "if self.num_experts_per_tok != 2:\n"
            "    raise ConfigError(\n"
            '        f"phimoe: sparsemixer routing is top-2 only, not num_experts_per_tok={self.num_experts_per_tok}",\n'
            '        "use top-2 or add the routing",\n'
            "    )",
        ),
        features={"sliding_window", "moe", "layernorm", "qkv_bias"},
    ),
    "deepseek_v3": _spec(
        "deepseek_v3",
        "multi-head latent attention (low-rank q and compressed kv, decoupled interleaved rotary), "
        "sigmoid group-limited MoE with a selection-only correction bias, routed scaling and shared experts, "
        "dense first layers",
        "MLAttention(args.hidden_size, args.num_attention_heads, q_lora_rank=args.q_lora_rank, "
        "kv_lora_rank=args.kv_lora_rank, qk_nope_head_dim=args.qk_nope_head_dim, qk_rope_head_dim=args.qk_rope_head_dim, "
        "v_head_dim=args.v_head_dim, rms_norm_eps=args.rms_norm_eps, bias=args.attention_bias, "
        "scale=mla_scale(args.qk_nope_head_dim + args.qk_rope_head_dim, rope_config(args, FULL, args.qk_rope_head_dim)), "
        "rope_interleaved=args.rope_interleave)",
        "MoE(args.hidden_size, args.n_routed_experts, args.moe_intermediate_size, RouterSpec(top_k="
        'args.num_experts_per_tok, scoring="sigmoid", norm_topk_prob=args.norm_topk_prob, routed_scaling_factor='
        "args.routed_scaling_factor, correction_bias=True, n_group=args.n_group, topk_group=args.topk_group), "
        "activation=args.hidden_act, shared_intermediate_size=args.moe_intermediate_size * args.n_shared_experts) "
        "if args.is_moe_layer(i) else " + GATED.format(bias=""),
        moe_layer="self.n_routed_experts > 0 and i >= self.first_k_dense_replace and i % self.moe_layer_freq == 0",
        rotary_head_dim="args.qk_rope_head_dim",
        fields=(
            ("q_lora_rank", "int | None", None),
            ("kv_lora_rank", "int", None),
            ("qk_nope_head_dim", "int", None),
            ("qk_rope_head_dim", "int", None),
            ("v_head_dim", "int", None),
            ("attention_bias", "bool", "False"),
            ("rope_interleave", "bool", "True"),
            ("n_routed_experts", "int", None),
            ("n_shared_experts", "int", "0"),
            ("num_experts_per_tok", "int", None),
            ("moe_intermediate_size", "int", None),
            ("norm_topk_prob", "bool", "True"),
            ("routed_scaling_factor", "float", "1.0"),
            ("n_group", "int", "1"),
            ("topk_group", "int", "1"),
            ("first_k_dense_replace", "int", "0"),
            ("moe_layer_freq", "int", "1"),
            ("num_nextn_predict_layers", "int", "0"),
        ),
        features={
            "mla",
            "moe",
            "shared_experts",
            "dense_first_layers",
            "router_correction_bias",
            "sigmoid_router",
            "mtp",
        },
    ),
    "gpt_oss": _spec(
        "gpt_oss",
        "alternating sliding/full attention with learned sinks and biases, yarn rotary, MoE with a "
        "biased router (softmax over the top-k logits) and clamped SwiGLU experts with biases",
        attention(*BIASED, SLIDING_ATTN, "sinks=True"),
        "GptOssMoE(args.hidden_size, args.num_local_experts, args.intermediate_size, args.num_experts_per_tok, "
        "args.swiglu_alpha, args.swiglu_limit)",
        layer_type="SLIDING if i % 2 == 0 else FULL",
        fields=(
            ("num_local_experts", "int", None),
            ("num_experts_per_tok", "int", None),
            ("attention_bias", "bool", "True"),
            ("swiglu_alpha", "float", "1.702"),
            ("swiglu_limit", "float", "7.0"),
        ),
        features={"sliding_window", "attention_sinks", "moe", "qkv_bias"},
    ),
    "olmo2": _spec(
        "olmo2",
        "post-norm decoder (RMSNorm after attention and MLP, before the residual add) with RMS QK-norm "
        "over all heads; norms multiply in float32",
        attention(*BIASED, 'qk_norm=QKNormSpec(args.rms_norm_eps, scope="all", casting="gemma")'),
        GATED.format(bias=""),
        norm='RMSNorm(dim, args.rms_norm_eps, casting="gemma")',
        placement="post",
        norm_names=("post_attention_layernorm", "post_feedforward_layernorm"),
        fields=(("attention_bias", "bool", "False"),),
        features={"post_norm", "qk_norm"},
    ),
    "olmoe": _spec(
        "olmoe",
        "pre-norm decoder with RMS QK-norm over all heads and a softmax top-k MoE",
        attention(*BIASED, 'qk_norm=QKNormSpec(args.rms_norm_eps, scope="all")'),
        "MoE(args.hidden_size, args.num_experts, args.intermediate_size, RouterSpec(top_k=args.num_experts_per_tok, "
        "norm_topk_prob=args.norm_topk_prob), activation=args.hidden_act)",
        fields=(
            ("num_experts", "int", None),
            ("num_experts_per_tok", "int", None),
            ("norm_topk_prob", "bool", "False"),
            ("attention_bias", "bool", "False"),
            ("clip_qkv", "float | None", "None"),
        ),
        post_init=(
            "if self.clip_qkv is not None:\n"
            "    raise ConfigError(\n"
            '        "olmoe: clip_qkv is not supported by the block library",\n'
            '        "ask for q/k/v clamping in onboard.blocks.attention",\n'
            "    )",
        ),
        features={"qk_norm", "moe"},
    ),
    "granite": _spec(
        "granite",
        "llama with embedding, residual and attention multipliers and logits divided by logits_scaling",
        attention(*BIASED, "scale=args.attention_multiplier"),
        GATED.format(bias=", bias=args.mlp_bias"),
        embed_scale="args.embedding_multiplier",
        residual_scale="args.residual_multiplier",
        lm_head=("scale=1.0 / args.logits_scaling",),
        fields=GRANITE_FIELDS + (("mlp_bias", "bool", "False"),),
        features=GRANITE_FEATURES,
    ),
    "granitemoe": _spec(
        "granitemoe",
        "granite with a softmax top-k MoE whose experts are stored stacked (input_linear / output_linear)",
        attention(*BIASED, "scale=args.attention_multiplier"),
        "MoE(args.hidden_size, args.num_local_experts, args.intermediate_size, RouterSpec(top_k="
        "args.num_experts_per_tok), activation=args.hidden_act)",
        mlp_attr="block_sparse_moe",
        embed_scale="args.embedding_multiplier",
        residual_scale="args.residual_multiplier",
        lm_head=("scale=1.0 / args.logits_scaling",),
        fields=GRANITE_FIELDS + (("num_local_experts", "int", None), ("num_experts_per_tok", "int", None)),
        features=GRANITE_FEATURES | {"moe"},
    ),
    "cohere": _spec(
        "cohere",
        "parallel attention and MLP from one LayerNorm (no bias), interleaved rotary, optional per-head "
        "LayerNorm QK-norm, logits multiplied by logit_scale, tied head",
        attention(
            *BIASED,
            "rope_interleaved=True",
            'qk_norm=QKNormSpec(args.layer_norm_eps, kind="layer", '
            'scope="per_head_weight") if args.use_qk_norm else None',
        ),
        GATED.format(bias=""),
        norm="LayerNorm(dim, args.layer_norm_eps, bias=False)",
        placement="parallel",
        norm_names=("input_layernorm",),
        lm_head=("scale=args.logit_scale",),
        fields=(
            ("layer_norm_eps", "float", "1e-05"),
            ("logit_scale", "float", "0.0625"),
            ("use_qk_norm", "bool", "False"),
            ("attention_bias", "bool", "False"),
            ("tie_word_embeddings", "bool", "True"),
        ),
        features={"layernorm", "parallel_residual", "logit_scaling", "qk_norm"},
    ),
    "starcoder2": _spec(
        "starcoder2",
        "pre-LayerNorm (with bias) decoder, biases everywhere, plain GELU-tanh MLP (c_fc / c_proj), "
        "sliding window on every layer when set, tied head",
        attention("qkv_bias=args.use_bias", "o_bias=args.use_bias", SLIDING_ATTN),
        "MLP(args.hidden_size, args.intermediate_size, args.hidden_act, bias=args.use_bias)",
        norm="LayerNorm(dim, args.norm_epsilon)",
        layer_type=SLIDING_IF_WINDOW,
        fields=(
            ("norm_epsilon", "float", "1e-05"),
            ("use_bias", "bool", "True"),
            ("tie_word_embeddings", "bool", "True"),
            ("hidden_act", "str", '"gelu_pytorch_tanh"'),
        ),
        features={"layernorm", "qkv_bias", "plain_mlp", "sliding_window"},
    ),
    "glm4": _spec(
        "glm4",
        "sandwich-norm decoder (norms after attention and after the MLP too), q/k/v biases, partial "
        "interleaved rotary, fused gate_up_proj in the checkpoint",
        attention("qkv_bias=args.attention_bias", "rope_interleaved=True"),
        GATED.format(bias=""),
        placement="sandwich",
        norm_names=("input_layernorm", "post_self_attn_layernorm", "post_attention_layernorm", "post_mlp_layernorm"),
        fields=(("attention_bias", "bool", "True"),),
        features={"qkv_bias", "partial_rotary", "sandwich_norm"},
    ),
    "smollm3": _spec(
        "smollm3",
        "llama with NoPE layers (no rotary where no_rope_layers[i] == 0) and optional sliding window",
        attention(*BIASED, SLIDING_ATTN),
        GATED.format(bias=", bias=args.mlp_bias"),
        layer_type="SLIDING if self.use_sliding_window and self.sliding_window and not self.no_rope_layers[i] else FULL",
        rope_kind="FULL if args.no_rope_layers[i] else None",
        fields=(
            ("use_sliding_window", "bool", "False"),
            ("attention_bias", "bool", "False"),
            ("mlp_bias", "bool", "False"),
            ("no_rope_layers", "list[int] | None", "None"),
            ("no_rope_layer_interval", "int", "4"),
            ("tie_word_embeddings", "bool", "True"),
        ),
        post_init=(
            "if self.no_rope_layers is None:\n"
            "    n = self.no_rope_layer_interval\n"
            "    self.no_rope_layers = [int((i + 1) % n != 0) for i in range(self.num_hidden_layers)]",
        ),
        features={"nope_layers", "sliding_window"},
    ),
    "ernie4_5": _spec(
        "ernie4_5",
        "llama with interleaved (GLM-style) rotary and optional biases (use_bias), tied head",
        attention("qkv_bias=args.use_bias", "o_bias=args.use_bias", "rope_interleaved=True"),
        GATED.format(bias=", bias=args.use_bias"),
        fields=(("use_bias", "bool", "False"), ("tie_word_embeddings", "bool", "True")),
        features={"qkv_bias"},
    ),
    "exaone4": _spec(
        "exaone4",
        "post-norm decoder with per-head RMS QK-norm; 3:1 sliding/full layers where the full layers "
        "use no rotary (NoPE) when a window is set",
        attention(*BIASED, SLIDING_ATTN, QK_HEAD),
        GATED.format(bias=""),
        placement="post",
        norm_names=("post_attention_layernorm", "post_feedforward_layernorm"),
        layer_type="SLIDING if self.sliding_window and (i + 1) % self.sliding_window_pattern else FULL",
        rope_kind="FULL if args.sliding_window is None or layer_type == SLIDING else None",
        fields=(("sliding_window_pattern", "int", "4"), ("attention_bias", "bool", "False")),
        features={"post_norm", "qk_norm", "sliding_window", "nope_layers"},
    ),
    "apertus": _spec(
        "apertus",
        "pre-norm decoder with per-head RMS QK-norm and a plain MLP with the learned xIELU activation",
        attention(*BIASED, QK_HEAD),
        "XIELUMLP(args.hidden_size, args.intermediate_size)",
        norm_names=("attention_layernorm", "feedforward_layernorm"),
        fields=(("attention_bias", "bool", "False"), ("hidden_act", "str", '"xielu"')),
        post_init=(
            'if self.hidden_act != "xielu":\n'
            "    raise ConfigError(\n"
            '        f"apertus: hidden_act {self.hidden_act!r} is not supported (only xielu)",\n'
            '        "regenerate the adapter for this activation",\n'
            "    )",
        ),
        features={"qk_norm", "plain_mlp"},
    ),
}
