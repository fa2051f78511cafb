"""Fixed recurrent state and KV of published hybrid configs, against the shapes transformers' caches allocate.

Each case is a released model's config.json (the fields that size its cache) and the arithmetic of its cache class:
what a user sizes a long-context deployment of a hybrid model by (state per sequence does not grow with length).
"""

from __future__ import annotations

from onboard.inspect_checkpoint import profile_from_parts
from onboard.profile import MemoryPlan


def plan(config: dict, max_model_len: int = 4096, kv_dtype: str = "bfloat16") -> MemoryPlan:
    return profile_from_parts(config, None, max_model_len=max_model_len, kv_dtype=kv_dtype).memory


# Qwen/Qwen3-Next-80B-A3B-Instruct config.json: 48 layers, every 4th full attention, the rest Gated DeltaNet.
QWEN3_NEXT = {
    "model_type": "qwen3_next", "architectures": ["Qwen3NextForCausalLM"], "hidden_size": 2048,
    "num_hidden_layers": 48, "full_attention_interval": 4, "num_attention_heads": 16, "num_key_value_heads": 2,
    "head_dim": 256, "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
    "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "intermediate_size": 5120,
    "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512, "num_experts": 512,
    "num_experts_per_tok": 10, "decoder_sparse_step": 1, "mlp_only_layers": [], "vocab_size": 151936,
    "partial_rotary_factor": 0.25, "max_position_embeddings": 262144, "torch_dtype": "bfloat16",
}  # fmt: skip


def test_qwen3_next_gated_deltanet_state():
    """Qwen3NextDynamicCache per linear layer: conv_states (conv_dim, kernel) with conv_dim = 2·k_heads·k_dim +
    v_heads·v_dim, recurrent_states (v_heads, k_dim, v_dim)."""
    conv = (2 * 16 * 128 + 32 * 128) * 4
    recurrent = 32 * 128 * 128
    memory = plan(QWEN3_NEXT)
    assert memory.state_bytes_per_sequence == 36 * (conv + recurrent) * 2
    assert memory.kv_bytes_per_token_by_kind == {"full": 12 * 2 * 256 * 2 * 2}
    assert memory.kv_bytes_per_sequence == memory.kv_bytes_per_token * 4096 + memory.state_bytes_per_sequence


# ai21labs/Jamba-v0.1 config.json: 32 layers, attention at 4 of every 8 (offset 4), Mamba elsewhere.
JAMBA = {
    "model_type": "jamba", "architectures": ["JambaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "attn_layer_period": 8, "attn_layer_offset": 4, "expert_layer_period": 2,
    "expert_layer_offset": 1, "num_experts": 16, "num_experts_per_tok": 2, "num_attention_heads": 32,
    "num_key_value_heads": 8, "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_dt_rank": 256,
    "mamba_conv_bias": True, "mamba_proj_bias": False, "vocab_size": 65536, "max_position_embeddings": 262144,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}  # fmt: skip


def test_jamba_mamba_state_is_sized_by_mamba_expand_not_the_mlp():
    """HybridMambaAttentionDynamicCache per Mamba layer: conv_states (d_inner, d_conv) and ssm_states (d_inner,
    d_state), d_inner = mamba_expand × hidden_size = 8192 (intermediate_size, 14336, is the MLP's width)."""
    d_inner = 2 * 4096
    memory = plan(JAMBA, max_model_len=262144)
    assert memory.state_bytes_per_sequence == 28 * d_inner * (4 + 16) * 2 == 9_175_040
    assert memory.kv_bytes_per_token_by_kind == {"full": 4 * 8 * 128 * 2 * 2}
    assert memory.kv_bytes_per_sequence == 4 * 8 * 128 * 2 * 2 * 262144 + 9_175_040
