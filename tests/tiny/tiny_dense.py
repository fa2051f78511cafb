"""Tiny configs of dense decoder-only families (see tests/tiny/configs.py)."""

from __future__ import annotations

from typing import Any

from tests.tiny.knobs import (
    DROP,
    GPT2,
    IDS,
    LLAMA,
    MLA,
    NO_HEAD_DIM,
    SLIDING_FULL,
    SSS_FULL,
    WINDOW,
    derive,
)

DENSE: dict[str, dict[str, Any]] = {
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
    "apertus1p5_text": NO_HEAD_DIM,
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
    "gemma3n_text": derive(
        LLAMA,
        intermediate_size=[128, 128],
        layer_types=SLIDING_FULL,
        sliding_window=WINDOW,
        vocab_size_per_layer_input=1000,  # 262144: per-layer embeddings would be 135M parameters
        hidden_size_per_layer_input=16,
        num_kv_shared_layers=0,
        laurel_rank=8,
        activation_sparsity_pattern=[0.0, 0.0],
    ),  # fmt: skip
    "gemma4_text": derive(
        LLAMA,
        layer_types=SLIDING_FULL,
        sliding_window=WINDOW,
        vocab_size_per_layer_input=1000,
        hidden_size_per_layer_input=16,
        global_head_dim=32,  # 512: full-attention layers get their own head_dim through per_layer_config
    ),  # fmt: skip
    "vaultgemma": derive(LLAMA, sliding_window=WINDOW, query_pre_attn_scalar=16),
    "nanochat": NO_HEAD_DIM,  # final logit softcap
    "doge": derive(NO_HEAD_DIM, keep_window_size=WINDOW),
    "minicpm3": derive(LLAMA, **MLA),  # MLA without MoE
    "youtu": derive(NO_HEAD_DIM, **MLA),
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
}
