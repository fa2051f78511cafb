"""Mixture-of-experts families' ArchSpecs (data; see arch_parts.ArchSpec for what each field means)."""

from __future__ import annotations

from onboard.generate_adapter.arch_parts import (
    BIASED,
    GATED,
    GRANITE_FEATURES,
    GRANITE_FIELDS,
    QK_HEAD,
    QWEN_FIELDS,
    QWEN_MOE_FIELDS,
    QWEN_SLIDING,
    QWEN_SPARSE,
    SLIDING_ATTN,
    SLIDING_IF_WINDOW,
    ArchSpec,
    _spec,
    attention,
)

MOE_ARCHS: dict[str, ArchSpec] = {
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
        "v_head_dim=args.v_head_dim, rms_norm_eps=MLA_LATENT_NORM_EPS, bias=args.attention_bias, "
        "scale=mla_scale(args.qk_nope_head_dim + args.qk_rope_head_dim, rope_config(args, FULL, args.qk_rope_head_dim)), "
        "rope_interleaved=args.rope_interleave)",
        "MoE(args.hidden_size, args.n_routed_experts, args.moe_intermediate_size, RouterSpec(top_k="
        'args.num_experts_per_tok, scoring="sigmoid", norm_topk_prob=args.norm_topk_prob, routed_scaling_factor='
        "args.routed_scaling_factor, correction_bias=True, n_group=args.n_group, topk_group=args.topk_group, "
        "logits_in_float32=True), "
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
        # DeepSeek's original config keys; V3 is always sigmoid scoring with noaux_tc (transformers reads neither).
        ignored_keys=("scoring_func", "topk_method", "ep_size", "aux_loss_alpha", "seq_aux"),
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
        aliases={"num_experts_per_tok": ("experts_per_token",)},
        features={"sliding_window", "attention_sinks", "moe", "qkv_bias"},
    ),
    "olmoe": _spec(
        "olmoe",
        "pre-norm decoder with RMS QK-norm over all heads and a softmax top-k MoE",
        attention(*BIASED, 'qk_norm=QKNormSpec(args.rms_norm_eps, scope="all")', "clip_qkv=args.clip_qkv"),
        "MoE(args.hidden_size, args.num_experts, args.intermediate_size, RouterSpec(top_k=args.num_experts_per_tok, "
        "norm_topk_prob=args.norm_topk_prob), activation=args.hidden_act)",
        fields=(
            ("num_experts", "int", None),
            ("num_experts_per_tok", "int", None),
            ("norm_topk_prob", "bool", "False"),
            ("attention_bias", "bool", "False"),
            ("clip_qkv", "float | None", "None"),
        ),
        features={"qk_norm", "moe"},
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
}
