"""Shared size knobs of the tiny configs: family bases with the real value each knob shrinks (see configs.py)."""

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
