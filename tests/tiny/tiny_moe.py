"""Tiny configs of mixture-of-experts families, MLA ones included (see tests/tiny/configs.py)."""

from __future__ import annotations

from typing import Any

from tests.tiny.knobs import (
    DEEPSEEK_MOE,
    DROP,
    IDS,
    LLAMA,
    MIXTRAL_MOE,
    MLA,
    NO_HEAD_DIM,
    OLMOE,
    QWEN_MOE,
    SLIDING_FULL,
    SSS_FULL,
    THREE,
    WINDOW,
    derive,
)

MOE: dict[str, dict[str, Any]] = {
    "mixtral": derive(LLAMA, **MIXTRAL_MOE),
    "phimoe": derive(NO_HEAD_DIM, sliding_window=WINDOW, **MIXTRAL_MOE),  # 16 experts top-2 in Phi-3.5-MoE
    "minimax_m2": derive(LLAMA, **MIXTRAL_MOE),
    "granitemoe": derive(NO_HEAD_DIM, **MIXTRAL_MOE),
    "granitemoe_swa": derive(NO_HEAD_DIM, sliding_window=WINDOW, layer_types=SLIDING_FULL, **MIXTRAL_MOE),
    "granitemoeshared": derive(NO_HEAD_DIM, shared_intermediate_size=64, **MIXTRAL_MOE),
    "jetmoe": dict(
        hidden_size=64,
        num_hidden_layers=2,
        num_key_value_heads=2,
        kv_channels=16,
        intermediate_size=128,
        vocab_size=1000,
        max_position_embeddings=256,
        **MIXTRAL_MOE,
        **IDS,
    ),  # fmt: skip
    "qwen2_moe": derive(NO_HEAD_DIM, shared_expert_intermediate_size=64, **QWEN_MOE),
    "qwen3_moe": derive(NO_HEAD_DIM, **QWEN_MOE),
    "olmoe": derive(NO_HEAD_DIM, intermediate_size=32, **OLMOE),  # experts use intermediate_size (1024)
    "flex_olmo": derive(NO_HEAD_DIM, intermediate_size=32, **OLMOE),
    "gpt_oss": derive(
        LLAMA,
        sliding_window=WINDOW,  # 128: alternating sliding / full layers, attention sinks
        **MIXTRAL_MOE,  # 32 experts top-4 in gpt-oss-20b
    ),
    "llama4_text": derive(
        LLAMA,
        num_hidden_layers=4,  # 48 in Llama-4-Scout: chunked x3 + one global NoPE layer
        attention_chunk_size=WINDOW,  # 8192
        floor_scale=8,  # 8192: the NoPE layers' query temperature then grows within the parity prompts
        intermediate_size_mlp=96,  # 16384 in Llama-4-Maverick's dense layers: unlike the experts' 128 here
        moe_layers=[1, 3],  # every layer in Scout; interleaved in Maverick
        **MIXTRAL_MOE,
    ),
    "ernie4_5_moe": derive(
        NO_HEAD_DIM,
        moe_num_experts=4,  # 64 in ERNIE-4.5-21B-A3B
        moe_k=2,  # 6
        moe_intermediate_size=32,
        moe_num_shared_experts=1,  # 2
        moe_layer_start_index=1,  # 1: first layer dense
        moe_layer_end_index=1,
    ),
    "hunyuan_v1_moe": derive(LLAMA, num_experts=4, moe_topk=2, eod_token_id=3),  # 64 experts top-8 in Hunyuan-A13B
    "dbrx": dict(
        d_model=64,  # 6144 in DBRX
        n_heads=4,  # 48
        n_layers=2,  # 40
        max_seq_len=256,
        vocab_size=1000,
        # rope_theta is read from attn_config by the modeling code though not a declared field (real configs carry it).
        attn_config={"kv_n_heads": 2, "clip_qkv": 8.0, "rope_theta": 500000.0},  # 8 KV heads, clip 8
        ffn_config={"ffn_hidden_size": 32, "moe_num_experts": 4, "moe_top_k": 2},  # 16 experts top-4
        **IDS,
    ),
    "aria_text": derive(LLAMA, moe_num_experts=4, moe_topk=2, moe_num_shared_experts=1),
    "deepseek_v2": derive(
        LLAMA, **{**THREE, **MLA, **DEEPSEEK_MOE, "q_lora_rank": None}, topk_method="group_limited_greedy"
    ),  # q_lora_rank None as in DeepSeek-V2-Lite,
    "deepseek_v3": derive(NO_HEAD_DIM, **THREE, **MLA, **DEEPSEEK_MOE),
    "glm4_moe": derive(NO_HEAD_DIM, **THREE, **DEEPSEEK_MOE, use_qk_norm=True),
    "glm4_moe_lite": derive(
        NO_HEAD_DIM,
        **THREE,
        **MLA,
        **derive(DEEPSEEK_MOE, first_k_dense_replace=DROP),
        mlp_layer_types=["dense", "sparse", "sparse"],
    ),  # fmt: skip
    "dots1": derive(NO_HEAD_DIM, **THREE, **DEEPSEEK_MOE, sliding_window=WINDOW),  # window unused: all layers full
    "sarvam_moe": derive(LLAMA, **THREE, **DEEPSEEK_MOE),
    "solar_open": derive(LLAMA, **THREE, **derive(DEEPSEEK_MOE, first_k_dense_replace=DROP), intermediate_size=DROP),
    "exaone_moe": derive(
        NO_HEAD_DIM,
        num_hidden_layers=4,
        sliding_window=WINDOW,
        sliding_window_pattern=4,
        first_k_dense_replace=1,
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=32,
        num_shared_experts=1,
    ),  # fmt: skip
    "sarvam_mla": derive(NO_HEAD_DIM, **{**THREE, **MLA, **DEEPSEEK_MOE}),
    # DeepSeek sparse attention: MLA plus an indexer whose keys are cached too (index_head_dim per token).
    "deepseek_v32": derive(LLAMA, **{**THREE, **MLA, **DEEPSEEK_MOE}, index_topk=4, index_head_dim=16, index_n_heads=2),
    "glm_moe_dsa": derive(LLAMA, **{**THREE, **MLA, **DEEPSEEK_MOE}, index_topk=4, index_head_dim=16, index_n_heads=2),
    "afmoe": derive(
        LLAMA,
        layer_types=SLIDING_FULL,
        sliding_window=WINDOW,
        num_dense_layers=1,
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=32,
        num_shared_experts=1,
    ),  # fmt: skip
    "hy_v3": derive(
        LLAMA,
        mlp_layer_types=["dense", "sparse"],
        num_experts=4,
        num_experts_per_tok=2,
        num_shared_experts=1,
        moe_intermediate_size=32,
    ),  # fmt: skip
    "cohere2_moe": derive(
        LLAMA,
        num_hidden_layers=4,
        layer_types=SSS_FULL,
        sliding_window=WINDOW,
        mlp_layer_types=["sparse"] * 4,
        num_experts=4,
        num_experts_per_tok=2,
    ),  # fmt: skip
    "flint": derive(
        LLAMA,
        layer_types=["full_attention", "sliding_attention"],
        sliding_window=WINDOW,
        mlp_only_layers=[0],
        shared_expert_intermediate_size=32,
        **QWEN_MOE,
    ),  # fmt: skip
    "kolibri1": derive(
        LLAMA,
        intermediate_size=DROP,
        layer_types=SLIDING_FULL,
        sliding_window=WINDOW,
        shared_expert_intermediate_size=32,
        **QWEN_MOE,
    ),  # fmt: skip
    "beam": derive(
        LLAMA,
        num_hidden_layers=3,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"],
        sliding_window=WINDOW,
        mlp_layer_types=["dense", "sparse", "sparse"],
        n_group=2,
        topk_group=1,
        **QWEN_MOE,
    ),  # fmt: skip
    "mimo_v2_flash": derive(
        LLAMA,
        **THREE,
        sliding_window=WINDOW,
        v_head_dim=8,  # 128 against head_dim 192: values narrower than queries and keys, as released
        layer_types=["full_attention", "sliding_attention", "sliding_attention"],
        mlp_layer_types=["dense", "sparse", "sparse"],
        n_routed_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=32,
    ),  # fmt: skip
    # --- new in transformers 5.25 ------------------------------------------------------------------------------
    # Ergo: fused qkv_proj, ungated ReLU^2 MLPs, every 4th layer global without RoPE, the others sliding; sigmoid
    # router with correction bias, a shared expert and a per-expert output norm; gated residuals.
    "ergo": derive(
        NO_HEAD_DIM,  # head_dim = hidden / heads: the config has no head_dim knob
        intermediate_size=DROP,
        num_hidden_layers=4,  # 64: global_attention_every_n_layers=4 kept -> sliding x3 + full
        sliding_window=WINDOW,  # 512
        first_dense_intermediate_size=128,  # 32768: the num_dense_blocks=1 leading dense layer
        shared_intermediate_size=32,  # 8192
        **QWEN_MOE,  # 256 experts top-8, moe_intermediate_size 4096
    ),  # fmt: skip
    # Kolibri 1.1: sliding layers plus weightless-indexer sparse layers without RoPE, whose later ones reuse an
    # earlier one's K/V (no k/v projections, nothing cached); two dense-MLP layers first, then Qwen-style MoE.
    "kolibri1_1": derive(
        LLAMA,
        intermediate_size=DROP,
        num_hidden_layers=4,  # 50: indexed every 5th layer
        layer_types=["sliding_attention", "indexed_attention"] * 2,  # layer 3 reads layer 1's K/V
        sliding_window=WINDOW,  # 513
        mlp_only_intermediate_size=128,  # 3584, for the default mlp_only_layers [0, 1]
        shared_expert_intermediate_size=32,  # 512
        index_num_heads=2,  # 12: at most the query heads of one KV head
        index_topk=4,  # 2048: the long probe (35 tokens) exceeds topk + local + sink, so selection runs
        index_pool_size=8,  # 16384
        index_compression=2,  # 16
        index_num_local_tokens=4,  # 128
        index_num_sink_tokens=2,  # 8
        **QWEN_MOE,  # 384 experts top-6, moe_intermediate_size 512
    ),  # fmt: skip
    # MiniCPM5-MoE: Llama GQA with a fused query+output-gate projection (q_gate_proj), DeepSeek-V3 MoE.
    "minicpm5_moe": derive(LLAMA, **THREE, **DEEPSEEK_MOE),  # 160 experts top-16; first_k_dense_replace is legacy
    # Param2-MoE: config only; transformers builds GLM-4-MoE (Glm4MoeForCausalLM) with full rotary, QK-norm and tied
    # embeddings.
    "param2moe": derive(LLAMA, **THREE, **derive(DEEPSEEK_MOE, n_shared_experts=2)),  # 64 experts top-6, 2 shared
}
