"""Layers that attend to another layer's keys and values cache nothing of their own (transformers gives them a
DummyLayer): Kolibri 1.1's `kv_source_layers`, Gemma 3n / Gemma 4's last `num_kv_shared_layers` layers. The plan's
KV bytes per token against the cache transformers fills on the tiny checkpoint (tests/tiny/ground_truth.py)."""

from __future__ import annotations

import pytest

from onboard.inspect_checkpoint import inspect
from tests.tiny.factory import make_tiny_checkpoint
from tests.tiny.ground_truth import ground_truth

TWO_SHARED = {"num_hidden_layers": 4, "layer_types": ["sliding_attention", "full_attention"] * 2,
              "num_kv_shared_layers": 2}  # fmt: skip
VARIANTS = [
    ("kolibri1_1", {}),  # layer 3 reads layer 1's K/V
    ("gemma4_text", TWO_SHARED),
    ("gemma3n_text", {**TWO_SHARED, "intermediate_size": [128] * 4, "activation_sparsity_pattern": [0.0] * 4}),
]


@pytest.mark.slow
@pytest.mark.parametrize(("model_type", "overrides"), VARIANTS, ids=[m for m, _ in VARIANTS])
def test_kv_shared_layers_cache_nothing(tmp_path, model_type: str, overrides: dict) -> None:
    folder = make_tiny_checkpoint(model_type, tmp_path / model_type, overrides=overrides)
    kv = ground_truth(model_type, folder)["kv_cache"]
    assert kv["per_layer"][-1]["kv_bytes_per_token"] == 0  # the premise: transformers caches nothing there
    plan = inspect(str(folder), kv_dtype="float32", max_model_len=kv["probe_tokens"][-1]).memory
    assert plan.kv_bytes_per_token == kv["kv_bytes_per_token"]


def test_gemma4_layer_options_are_features_not_unknown_fields(tmp_path) -> None:
    """What Gemma 4's config keys do to the layers is in the profile's features (so `inspect` compares it
    with known families and composition acts on it), and none of them is reported as an unknown field. Its
    use_bidirectional_attention "vision" concerns image tokens (text stays causal); "all" is a feature, which
    composition refuses by name."""
    folder = make_tiny_checkpoint("gemma4_unified_text", tmp_path / "g4")
    profile = inspect(str(folder))
    assert {"kv_shared_layers", "double_wide_mlp", "values_from_keys"} <= set(profile.features)
    assert "bidirectional_attention" not in profile.features and "norm_offset" not in profile.features
    assert not [f for f in profile.findings if f.code == "config-unknown-field"], profile.findings
    both_ways = make_tiny_checkpoint("gemma4_unified_text", tmp_path / "all",
                                     overrides={"use_bidirectional_attention": "all"})  # fmt: skip
    assert "bidirectional_attention" in inspect(str(both_ways)).features
    moe = {"enable_moe_block": True, "num_experts": 4, "top_k_experts": 2, "moe_intermediate_size": 24}
    e4b = inspect(str(make_tiny_checkpoint("gemma4_text", tmp_path / "moe", overrides=moe)))
    assert {"per_layer_embeddings", "moe_beside_mlp"} <= set(e4b.features)
    assert not [f for f in e4b.findings if f.code == "config-unknown-field"], e4b.findings
