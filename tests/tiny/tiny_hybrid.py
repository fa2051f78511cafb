"""Tiny configs of hybrid (attention + linear / SSM / conv) and pure SSM / recurrent families."""

from __future__ import annotations

from typing import Any

from tests.tiny.knobs import (
    DROP,
    IDS,
    LLAMA,
    MIXTRAL_MOE,
    MLA,
    NO_HEAD_DIM,
    QWEN_MOE,
    WINDOW,
    derive,
)

HYBRID: dict[str, dict[str, Any]] = {
    "qwen3_next": derive(
        LLAMA,
        num_hidden_layers=4,  # 48 in Qwen3-Next-80B-A3B: 3 gated-DeltaNet layers then 1 full attention
        linear_key_head_dim=16,  # 128
        linear_value_head_dim=16,  # 128
        linear_num_key_heads=2,  # 16
        linear_num_value_heads=4,  # 32
        shared_expert_intermediate_size=32,
        **QWEN_MOE,  # 512 experts top-10
    ),
    "qwen3_5_text": derive(
        LLAMA,
        num_hidden_layers=4,
        linear_key_head_dim=16,
        linear_value_head_dim=16,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
    ),  # fmt: skip
    "qwen3_5_moe_text": derive(
        LLAMA,
        intermediate_size=DROP,
        num_hidden_layers=4,
        linear_key_head_dim=16,
        linear_value_head_dim=16,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        shared_expert_intermediate_size=32,
        **QWEN_MOE,
    ),  # fmt: skip
    "lara_mini": derive(
        LLAMA,
        intermediate_size=DROP,
        num_hidden_layers=4,
        sliding_window=WINDOW,
        layer_types=["linear_attention", "sliding_attention", "linear_attention", "full_attention"],
        linear_key_head_dim=16,
        linear_value_head_dim=16,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        shared_expert_intermediate_size=32,
        **(QWEN_MOE | {"moe_intermediate_size": 24}),  # 2 x 24 != hidden 64: the experts' layout reads from shapes
    ),  # fmt: skip
    "olmo_hybrid": derive(
        NO_HEAD_DIM,
        layer_types=["linear_attention", "full_attention"],
        linear_num_key_heads=2,
        linear_num_value_heads=2,
        linear_key_head_dim=16,
        linear_value_head_dim=32,
    ),  # fmt: skip
    # Kimi delta attention (linear) next to MLA attention.
    "kimi_linear": derive(
        NO_HEAD_DIM,
        **MLA,
        layer_types=["linear_attention", "full_attention"],
        mlp_layer_types=["dense", "sparse"],
        linear_head_dim=16,
        linear_num_heads=4,
        num_local_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=32,
        n_shared_experts=1,
    ),  # fmt: skip
    "bailing_hybrid": derive(
        LLAMA,
        **MLA,
        layer_types=["linear_attention", "full_attention"],
        mlp_layer_types=["dense", "sparse"],
        num_local_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=32,
        first_k_dense_replace=1,
        n_group=2,
        topk_group=1,
        n_shared_experts=1,
    ),  # fmt: skip
    "minimax": derive(LLAMA, **MIXTRAL_MOE, block_size=8),  # linear (lightning) / full alternation
    "jamba": derive(
        NO_HEAD_DIM,
        attn_layer_period=2,  # 8 in Jamba-v0.1: one attention layer per 8
        attn_layer_offset=1,  # 4
        expert_layer_period=2,  # 2
        expert_layer_offset=1,  # 1
        num_experts=4,  # 16
        mamba_d_state=8,  # 16
        mamba_dt_rank=8,  # 256
        use_mamba_kernels=False,
    ),
    "bamba": derive(NO_HEAD_DIM, attn_layer_indices=[1], mamba_n_heads=8, mamba_d_head=16, mamba_d_state=8),
    "granitemoehybrid": derive(
        NO_HEAD_DIM,
        layer_types=["mamba", "attention"],
        mamba_n_heads=8,
        mamba_d_head=16,
        mamba_d_state=8,
        shared_intermediate_size=64,
        **MIXTRAL_MOE,
    ),  # fmt: skip
    # muP multipliers set off 1 and the gated norm on (both off by default): parity then checks each is read
    "falcon_h1": derive(NO_HEAD_DIM, mamba_d_ssm=128, mamba_n_heads=8, mamba_d_head=16, mamba_d_state=8,
                        ssm_multipliers=[0.35, 0.25, 0.5, 0.5, 0.7], ssm_in_multiplier=1.25, ssm_out_multiplier=0.23,
                        attention_in_multiplier=1.0, attention_out_multiplier=0.94, key_multiplier=0.39,
                        mlp_multipliers=[0.88, 0.58], embedding_multiplier=5.7, lm_head_multiplier=0.02,
                        mamba_rms_norm=True, mamba_norm_before_gate=False),  # fmt: skip
    "nemotron_h": derive(
        LLAMA,
        num_hidden_layers=DROP,  # derived from layers_block_type (52 layers in Nemotron-H-8B)
        layers_block_type=["mamba", "moe", "attention", "mlp"],
        mamba_num_heads=8,  # 128
        mamba_head_dim=16,  # 64
        ssm_state_size=8,  # 128
        n_groups=2,  # 8
        n_routed_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=32,
        moe_shared_expert_intermediate_size=32,
    ),
    "zamba2": derive(
        NO_HEAD_DIM,
        num_hidden_layers=3,
        num_key_value_heads=DROP,
        layers_block_type=["mamba", "hybrid", "mamba"],
        mamba_d_state=8,
        n_mamba_heads=4,
        adapter_rank=8,
    ),  # fmt: skip
    "recurrent_gemma": derive(
        NO_HEAD_DIM,
        num_hidden_layers=3,
        max_position_embeddings=DROP,
        lru_width=64,
        attention_window_size=WINDOW,
        block_types=["recurrent", "recurrent", "attention"],
    ),  # fmt: skip
    "lfm2": derive(NO_HEAD_DIM, full_attn_idxs=[1], block_auto_adjust_ff_dim=False),  # conv then attention
    "lfm3": derive(
        LLAMA,
        num_hidden_layers=4,
        layer_types=["conv", "sliding_attention", "conv", "full_attention"],
        sliding_window=WINDOW,
    ),  # fmt: skip
    "lfm2_moe": derive(
        NO_HEAD_DIM,
        num_hidden_layers=3,
        layer_types=["conv", "full_attention", "conv"],
        num_dense_layers=1,
        **QWEN_MOE,
    ),  # fmt: skip
    # --- Pure SSM / recurrent ------------------------------------------------------------------------------------
    "mamba": dict(hidden_size=64, num_hidden_layers=2, state_size=8, vocab_size=1000, time_step_rank=8, **IDS),
    "falcon_mamba": dict(hidden_size=64, num_hidden_layers=2, state_size=8, vocab_size=1000, time_step_rank=8, **IDS),
    "mamba2": dict(
        hidden_size=64,  # 4096 in Mamba-Codestral-7B
        num_hidden_layers=2,  # 64
        num_heads=8,  # 128: num_heads * head_dim == expand * hidden_size
        head_dim=16,  # 64
        n_groups=2,  # 8
        state_size=8,  # 128
        time_step_rank=8,
        vocab_size=1000,
        **IDS,
    ),
    "rwkv": dict(
        hidden_size=64,
        num_hidden_layers=2,
        attention_hidden_size=64,
        intermediate_size=128,
        context_length=256,
        vocab_size=1000,
        bos_token_id=1,
        eos_token_id=2,
    ),  # fmt: skip
}
