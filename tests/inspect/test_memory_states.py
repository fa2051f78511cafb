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
