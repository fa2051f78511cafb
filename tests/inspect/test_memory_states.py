"""Fixed recurrent state per sequence, from config.json, against the state transformers' model really keeps.

The tiny configs use widths equal to hidden_size, where reading a width from the wrong key gives the same answer;
these variants set every width and kernel apart, and tests/tiny/ground_truth.py weighs the real cache.
"""

from __future__ import annotations

import pytest

from onboard.inspect_checkpoint import inspect

VARIANTS = [
    ("recurrent_gemma", {"lru_width": 96, "conv1d_width": 3}),
    ("kimi_linear", {"linear_head_dim": 8, "linear_num_heads": 2, "linear_conv_kernel_dim": 3}),
    ("minimax", {"head_dim": 24, "num_attention_heads": 6}),  # lightning attention: head_dim² per head
    (
        "qwen3_next",
        {
            "linear_key_head_dim": 8,
            "linear_value_head_dim": 24,
            "linear_num_key_heads": 2,
            "linear_num_value_heads": 6,
            "linear_conv_kernel_dim": 3,
        },
    ),
    ("olmo_hybrid", {"linear_conv_kernel_dim": 3}),  # key heads of 16, value heads of 32
    ("mamba", {"state_size": 6, "conv_kernel": 3, "expand": 3}),
    ("mamba2", {"state_size": 6, "conv_kernel": 3, "n_groups": 4, "num_heads": 8, "head_dim": 24, "expand": 3}),
    # Jamba and Zamba size the mixer as mamba_expand x hidden_size; their intermediate_size is the MLP's.
    ("jamba", {"mamba_d_state": 6, "mamba_d_conv": 3, "mamba_expand": 3}),
    ("zamba", {"mamba_d_state": 6, "mamba_d_conv": 3, "mamba_expand": 3}),
    (
        "falcon_h1",
        {
            "mamba_d_ssm": 96,
            "mamba_n_heads": 6,
            "mamba_d_head": 16,
            "mamba_d_state": 6,
            "mamba_d_conv": 3,
            "mamba_n_groups": 2,
        },
    ),
    (
        "bamba",
        {
            "mamba_n_heads": 6,
            "mamba_d_head": 32,
            "mamba_d_state": 6,
            "mamba_d_conv": 3,
            "mamba_n_groups": 2,
            "mamba_expand": 3,
        },
    ),
    ("zamba2", {"mamba_d_state": 6, "mamba_d_conv": 3, "n_mamba_heads": 6, "mamba_ngroups": 2, "mamba_expand": 3}),
    ("nemotron_h", {"mamba_num_heads": 6, "mamba_head_dim": 12, "ssm_state_size": 6, "conv_kernel": 3, "n_groups": 2}),
    ("lfm2", {"conv_L_cache": 5}),
    # ZAYA's conv window over q and k, and Inkling's short convs, beside their KV.
    ("zaya", {"cca_time0": 3, "cca_time1": 4, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 12}),
    ("inkling_text", {"conv_kernel_size": 3, "swa_num_key_value_heads": 1, "swa_head_dim": 24}),
    ("inkling2_loop_text", {"loop_num_passes": 3}),  # each pass over the looped layers keeps its own states
    ("cpmant", {"prompt_length": 5}),  # a fixed K and V prefix of prompt_length tokens
]


@pytest.mark.parametrize(("model_type", "overrides"), VARIANTS, ids=[m for m, _ in VARIANTS])
def test_recurrent_state_matches_the_cache_transformers_keeps(tmp_path, model_type: str, overrides: dict) -> None:
    from tests.tiny.factory import make_tiny_checkpoint
    from tests.tiny.ground_truth import ground_truth

    folder = make_tiny_checkpoint(model_type, tmp_path / model_type, overrides=overrides)
    truth = ground_truth(model_type, folder)
    state = truth["kv_cache"]["state_bytes_per_sequence"]
    assert state > 0
    profile = inspect(str(folder), kv_dtype="float32", max_model_len=truth["kv_cache"]["probe_tokens"][-1])
    assert profile.memory.state_bytes_per_sequence == state
