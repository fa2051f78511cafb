"""TINY: transformers `model_type` -> config overrides that shrink a real architecture to a test-sized model.

Sizes follow ../shared/notes/ENVIRONMENT.md ("Tiny checkpoints"): hidden 64, 2-4 layers, 4 heads / 2 KV heads,
head_dim 16, vocab 1000, intermediate 128, 4 experts top-2, MoE intermediate 32. Comments give the real value
(`hidden_size=64,  # 4096 in Llama-3-8B`). Each entry keeps what makes its family interesting: sliding layers next
to full ones, a dense-first layer before MoE layers, both layer kinds in hybrids.

Every key must be a field of the family's config class (or a legacy keyword it consumes): `make_tiny_checkpoint`
rejects keys that would end up as stray, unused config attributes.
"""

from __future__ import annotations

from typing import Any

DROP: Any = object()  # marks a base knob the family's config does not have
WINDOW = 16  # sliding window / attention chunk: 4096 in Mistral-7B-v0.1, 128 in gpt-oss; > the 8-token probe


def derive(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """`base` with `changes` applied; a change of DROP removes that knob."""
    out = dict(base)
    for key, value in changes.items():
        if value is DROP:
            out.pop(key, None)
        else:
            out[key] = value
    return out


IDS = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)  # defaults (e.g. 128000 in Llama 3) exceed vocab 1000
LLAMA: dict[str, Any] = dict(
    hidden_size=64,  # 4096 in Llama-3-8B
    intermediate_size=128,  # 14336
    num_hidden_layers=2,  # 32
    num_attention_heads=4,  # 32
    num_key_value_heads=2,  # 8: keeps GQA (2 query heads per KV head)
    head_dim=16,  # 128
    vocab_size=1000,  # 128256
    max_position_embeddings=256,  # 8192
    **IDS,
)
NO_HEAD_DIM = derive(LLAMA, head_dim=DROP)  # configs that derive head_dim = hidden / heads = 16
GPT2: dict[str, Any] = dict(
    n_embd=64,  # 768 in GPT-2
    n_layer=2,  # 12
    n_head=4,  # 12
    n_inner=128,  # 3072 (4 * n_embd when None)
    n_positions=256,  # 1024
    vocab_size=1000,  # 50257
    **IDS,
)
QWEN_MOE = dict(
    num_experts=4,  # 128 in Qwen3-30B-A3B
    num_experts_per_tok=2,  # 8
    moe_intermediate_size=32,  # 768
)
OLMOE = dict(num_experts=4, num_experts_per_tok=2)  # 64 experts top-8 in OLMoE-1B-7B
MIXTRAL_MOE = dict(num_local_experts=4, num_experts_per_tok=2)  # 8 experts top-2 in Mixtral-8x7B
MLA = dict(
    kv_lora_rank=32,  # 512 in DeepSeek-V3: the cached latent is kv_lora_rank + qk_rope_head_dim per token
    q_lora_rank=48,  # 1536 (None in DeepSeek-V2-Lite)
    qk_rope_head_dim=8,  # 64
    qk_nope_head_dim=16,  # 128
    v_head_dim=16,  # 128
    num_key_value_heads=4,  # 128 = heads: MLA expands the latent to one K/V per query head
)
DEEPSEEK_MOE = dict(
    n_routed_experts=4,  # 256 in DeepSeek-V3
    n_shared_experts=1,  # 1
    num_experts_per_tok=2,  # 8
    moe_intermediate_size=32,  # 2048
    n_group=2,  # 8: experts are routed within groups
    topk_group=1,  # 4
    first_k_dense_replace=1,  # 3: the first layer keeps a dense MLP
)
THREE = dict(num_hidden_layers=3)  # dense-first + 2 MoE layers
FOUR = dict(num_hidden_layers=4)
SLIDING_FULL = ["sliding_attention", "full_attention"]
SSS_FULL = ["sliding_attention"] * 3 + ["full_attention"]

TINY: dict[str, dict[str, Any]] = {
    # --- Llama-like dense decoders -------------------------------------------------------------------------------
    "llama": LLAMA,
    "mistral": derive(LLAMA, sliding_window=WINDOW),  # every layer sliding, 4096 in Mistral-7B-v0.1
    "ministral": derive(LLAMA, sliding_window=WINDOW, layer_types=SLIDING_FULL),
    "ministral3": derive(LLAMA, sliding_window=None),
    "arcee": LLAMA,  # ReLU^2 MLP without gate
    "helium": LLAMA,
    "hunyuan_v1_dense": derive(LLAMA, eod_token_id=3),  # QK-norm
    "granite": derive(
        NO_HEAD_DIM,
        embedding_multiplier=12.0,  # 12.0 in granite-3.0-8b
        logits_scaling=16.0,  # 16.0
        residual_multiplier=0.22,  # 0.22
        attention_multiplier=0.0078125,  # 1/128
    ),
    "granite_swa": derive(NO_HEAD_DIM, sliding_window=WINDOW, layer_types=SLIDING_FULL),
    "glm": LLAMA,
    "glm4": LLAMA,  # extra post-attention / post-MLP norms
    "nemotron": derive(LLAMA, hidden_act="relu2"),
    "exaone": LLAMA,
    "internlm3": LLAMA,
    "cwm": derive(LLAMA, sliding_window=WINDOW, layer_types=SLIDING_FULL),
    "iquestcoder": LLAMA,
    "hyperclovax": LLAMA,
    "jais2": LLAMA,
    "seed_oss": derive(LLAMA, attention_bias=True),  # q/k/v biases, no o_proj bias as in Seed-OSS-36B
    "apertus": NO_HEAD_DIM,  # xIELU activation, QK-norm
    "olmo": derive(NO_HEAD_DIM, clip_qkv=8.0),
    "olmo2": NO_HEAD_DIM,  # QK-norm over all heads, post-norms
    "olmo3": derive(NO_HEAD_DIM, num_hidden_layers=4, sliding_window=WINDOW, layer_types=SSS_FULL),
    "ernie4_5": LLAMA,
    "bitnet": NO_HEAD_DIM,
    "diffllama": LLAMA,
    "stablelm": derive(NO_HEAD_DIM, qk_layernorm=True),
    "smollm3": derive(NO_HEAD_DIM, num_hidden_layers=4, no_rope_layer_interval=4),  # layer 3 is NoPE
    "exaone4": derive(NO_HEAD_DIM, num_hidden_layers=4, sliding_window=WINDOW, sliding_window_pattern=4),
    "qwen2": derive(NO_HEAD_DIM, sliding_window=WINDOW),  # use_sliding_window stays False: window is ignored
    "qwen3": derive(LLAMA, use_sliding_window=True, sliding_window=WINDOW, max_window_layers=1),  # layer 1 sliding
    "starcoder2": derive(NO_HEAD_DIM, sliding_window=WINDOW),  # 4096 in StarCoder2-7B
    "phi3": derive(NO_HEAD_DIM, sliding_window=WINDOW, original_max_position_embeddings=256),  # 2047 in Phi-3-mini
    "cohere": derive(NO_HEAD_DIM, logit_scale=0.0625, use_qk_norm=True),
    "cohere2": derive(NO_HEAD_DIM, num_hidden_layers=4, sliding_window=WINDOW, layer_types=SSS_FULL),
    "gemma": derive(LLAMA, hidden_size=64, head_dim=16),  # 256 head_dim, 256000 vocab in Gemma-7B
    "gemma2": derive(LLAMA, sliding_window=WINDOW, query_pre_attn_scalar=16),  # softcaps 50/30 kept
    "gemma3_text": derive(LLAMA, sliding_window=WINDOW, layer_types=SLIDING_FULL, query_pre_attn_scalar=16),
    "vaultgemma": derive(LLAMA, sliding_window=WINDOW, query_pre_attn_scalar=16),
    "nanochat": NO_HEAD_DIM,  # final logit softcap
    "doge": derive(NO_HEAD_DIM, keep_window_size=WINDOW),
    # --- GPT-2 era / other dense ---------------------------------------------------------------------------------
    "gpt2": GPT2,
    "gpt-sw3": GPT2,
    "gpt_bigcode": derive(GPT2, multi_query=True),  # MQA: one KV head
    "gptj": derive(GPT2, rotary_dim=8),  # 64 in GPT-J-6B: partial rotary
    "codegen": derive(GPT2, rotary_dim=8, n_ctx=256, pad_token_id=DROP),
    "openai-gpt": derive(GPT2, n_inner=DROP, pad_token_id=DROP, bos_token_id=DROP, eos_token_id=DROP),
    "ctrl": dict(n_embd=64, dff=128, n_layer=2, n_head=4, n_positions=256, vocab_size=1000, pad_token_id=0),
    "gpt_neo": dict(
        hidden_size=64,  # 2048 in gpt-neo-1.3B
        num_layers=2,  # 24
        num_heads=4,  # 16
        intermediate_size=128,
        attention_types=[[["global", "local"], 1]],  # alternating global/local, window 256
        window_size=WINDOW,
        vocab_size=1000,
        max_position_embeddings=256,
        **IDS,
    ),
    "gpt_neox": derive(NO_HEAD_DIM, num_key_value_heads=DROP),  # partial rotary 0.25, parallel residual
    "gpt_neox_japanese": derive(NO_HEAD_DIM, num_key_value_heads=DROP, intermediate_size=DROP),
    "persimmon": derive(NO_HEAD_DIM, num_key_value_heads=DROP, qk_layernorm=True),
    "phi": derive(NO_HEAD_DIM, qk_layernorm=False),  # partial rotary 0.5, parallel attention+MLP
    "falcon": dict(
        hidden_size=64,  # 4544 in Falcon-7B
        num_hidden_layers=2,  # 32
        num_attention_heads=4,  # 71
        multi_query=True,  # one KV head
        ffn_hidden_size=128,
        vocab_size=1000,
        max_position_embeddings=256,
        **IDS,
    ),
    "bloom": dict(hidden_size=64, n_layer=2, n_head=4, vocab_size=1000, **IDS),  # ALiBi, no position embeddings
    "mpt": dict(d_model=64, n_heads=4, n_layers=2, expansion_ratio=2, max_seq_len=256, vocab_size=1000, **IDS),
    "opt": derive(NO_HEAD_DIM, num_key_value_heads=DROP, intermediate_size=DROP, ffn_dim=128, word_embed_proj_dim=64),
    "xglm": dict(d_model=64, ffn_dim=128, num_layers=2, attention_heads=4, vocab_size=1000, **IDS),
    "biogpt": derive(NO_HEAD_DIM, num_key_value_heads=DROP),
    # --- MoE -------------------------------------------------------------------------------------------------------
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
        intermediate_size_mlp=128,
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
    "mimo_v2_flash": derive(
        LLAMA,
        **THREE,
        sliding_window=WINDOW,
        v_head_dim=16,
        layer_types=["full_attention", "sliding_attention", "sliding_attention"],
        mlp_layer_types=["dense", "sparse", "sparse"],
        n_routed_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=32,
    ),  # fmt: skip
    # --- Hybrids: attention + linear attention / SSM / conv -----------------------------------------------------
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
    "falcon_h1": derive(NO_HEAD_DIM, mamba_d_ssm=128, mamba_n_heads=8, mamba_d_head=16, mamba_d_state=8),
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
