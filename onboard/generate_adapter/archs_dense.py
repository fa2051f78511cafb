"""Dense families' ArchSpecs (data; see arch_parts.ArchSpec for what each field means)."""

from __future__ import annotations

from onboard.generate_adapter.arch_parts import (
    BIASED,
    GATED,
    GEMMA_FIELDS,
    GEMMA_GATED,
    GEMMA_NORMS,
    GRANITE_FEATURES,
    GRANITE_FIELDS,
    LLAMA,
    QK_HEAD,
    QWEN_FIELDS,
    QWEN_SLIDING,
    SLIDING_ATTN,
    SLIDING_IF_WINDOW,
    ArchSpec,
    _spec,
    attention,
)

DENSE_ARCHS: dict[str, ArchSpec] = {
    "llama": LLAMA,
    "mistral": _spec(
        "mistral",
        "llama + sliding-window attention on every layer when `sliding_window` is set",
        attention(SLIDING_ATTN),
        GATED.format(bias=""),
        layer_type=SLIDING_IF_WINDOW,
        features={"sliding_window"},
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
    "qwen3": _spec(
        "qwen3",
        "llama + per-head RMS QK-norm before rotary; optional sliding window like qwen2",
        attention(*BIASED, SLIDING_ATTN, QK_HEAD),
        GATED.format(bias=""),
        layer_type=QWEN_SLIDING,
        fields=QWEN_FIELDS + (("attention_bias", "bool", "False"),),
        features={"qk_norm", "sliding_window"},
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
        # Phi-3 configs carry attention_bias, transformers' Phi3 never reads it (biases would be unknown tensors).
        ignored_keys=("attention_bias",),
        features={"sliding_window", "partial_rotary"},
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
