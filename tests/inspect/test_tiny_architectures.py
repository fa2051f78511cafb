"""`onboard inspect` on tiny checkpoints of real architectures vs transformers' own answer (tests/tiny).

The inspector reads only config.json and safetensors headers; the ground truth loads the model and runs it:
num_parameters(), the mixer modules of each layer, and the bytes of a real KV cache after a forward.
"""

from __future__ import annotations

import pytest

from onboard.inspect_checkpoint import inspect
from onboard.inspect_checkpoint.families import known_model_types
from onboard.inspect_checkpoint.registry import VERIFIED
from tests.tiny.configs import TINY
from tests.tiny.fixtures import tiny_checkpoint, tiny_ground_truth  # noqa: F401  (session fixtures)

# The architectures issue 2 names explicitly; every other TINY entry is checked too.
REQUIRED = {
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen3_next", "gemma", "gemma2",
    "gemma3_text", "phi3", "phimoe", "deepseek_v2", "deepseek_v3", "gpt_oss", "olmo2", "olmoe", "granite",
    "granitemoe", "cohere", "cohere2", "starcoder2", "gpt2", "gpt_neox", "falcon", "glm4", "glm4_moe", "minimax",
    "jamba", "mamba2", "nemotron_h", "smollm3", "llama4_text", "ernie4_5_moe", "exaone4", "hunyuan_v1_moe",
    "apertus", "seed_oss", "lfm2",
}  # fmt: skip

# Expected features per architecture (a subset: what defines the family).
FEATURES = {
    "llama": {"gqa", "rope:default"},
    "mistral": {"sliding_window"},
    "mixtral": {"moe"},
    "qwen2": {"qkv_bias"},
    "qwen2_moe": {"moe", "shared_experts"},
    "qwen3": {"qk_norm"},
    "qwen3_moe": {"moe", "qk_norm"},
    "qwen3_next": {"linear_attention", "interleaved_attention", "moe", "norm_offset", "partial_rotary"},
    "gemma": {"norm_offset", "embedding_scaling"},
    "gemma2": {"sliding_window", "attn_softcap", "final_softcap", "sandwich_norm", "query_pre_attn_scalar"},
    "gemma3_text": {"sliding_window", "qk_norm", "sandwich_norm"},
    "phi3": {"rope:default"},
    "phimoe": {"moe", "layernorm"},
    "deepseek_v2": {"mla", "moe", "shared_experts"},
    "deepseek_v3": {"mla", "moe", "shared_experts", "router_correction_bias", "sigmoid_router", "dense_first_layers"},
    "gpt_oss": {"attention_sinks", "sliding_window", "interleaved_attention", "moe", "rope:yarn"},
    "olmo2": {"qk_norm", "post_norm"},
    "olmoe": {"moe", "qk_norm"},
    "granite": {"logit_scaling", "embedding_scaling", "residual_scaling", "attention_multiplier"},
    "granitemoe": {"moe", "attention_multiplier"},
    "cohere": {"logit_scaling", "layernorm", "parallel_residual"},
    "cohere2": {"sliding_window", "interleaved_attention", "logit_scaling"},
    "starcoder2": {"layernorm", "plain_mlp"},
    "gpt2": {"absolute_positions", "layernorm", "plain_mlp"},
    "gpt_neox": {"partial_rotary", "layernorm"},
    "falcon": {"mqa", "layernorm"},
    "glm4": {"partial_rotary"},
    "glm4_moe": {"moe", "shared_experts", "router_correction_bias"},
    "minimax": {"moe", "linear_attention"},
    "jamba": {"ssm", "moe", "interleaved_attention"},
    "mamba2": {"ssm"},
    "nemotron_h": {"ssm", "interleaved_attention"},
    "smollm3": {"nope_layers"},
    "llama4_text": {"chunked_attention", "nope_layers", "moe"},
    "ernie4_5_moe": {"moe"},
    "exaone4": {"sliding_window", "qk_norm"},
    "hunyuan_v1_moe": {"moe", "qk_norm"},
    "apertus": {"qk_norm", "rope:llama3"},
    "seed_oss": {"qkv_bias"},
    "lfm2": {"short_conv", "interleaved_attention"},
}

# Where transformers' own cache is not what a serving engine allocates, the measured KV cannot be the reference.
KV_MEASUREMENT_DIFFERS = {
    "gpt_neo": "transformers keeps every token for GPT-Neo's local layers; an engine caps them at window_size",
    "openai-gpt": "transformers builds no KV cache for openai-gpt; an engine caches K and V per layer",
}

# Kinds the ground truth and the profile name differently but mean the same: linear-or-SSM is one class.
_SAME = {"linear": "recurrent", "ssm": "recurrent"}


def _kind(layer) -> str:
    base = _SAME.get(layer.attention, layer.attention)
    return f"{base}+recurrent" if layer.parallel_ssm else base


def _truth_kind(kind: str) -> str:
    return "+".join(_SAME.get(k, k) for k in kind.split("+"))


def test_required_architectures_have_tiny_configs():
    missing = REQUIRED - set(TINY)
    assert not missing, f"add tiny configs for {sorted(missing)} to tests/tiny/configs.py"


def test_registry_coverage():
    """Every architecture inspect claims to be verified on has a tiny checkpoint, and the other way round."""
    untested = VERIFIED - set(TINY)
    assert not untested, f"{sorted(untested)} are in onboard/inspect_checkpoint/registry.py VERIFIED without a tiny " \
        "checkpoint: add them to tests/tiny/configs.py (or drop them from VERIFIED)"
    unlisted = set(TINY) - VERIFIED
    assert not unlisted, f"{sorted(unlisted)} have tiny checkpoints: add them to VERIFIED in registry.py"
    assert REQUIRED <= VERIFIED


def test_every_family_with_an_expectation_is_known():
    unknown = set(FEATURES) - known_model_types()
    assert not unknown, f"{sorted(unknown)} missing from onboard/data/families.json: run scripts/build_family_catalog.py"


@pytest.mark.slow
@pytest.mark.parametrize("model_type", sorted(TINY))
def test_profile_matches_transformers(model_type, tiny_checkpoint, tiny_ground_truth):  # noqa: F811
    truth = tiny_ground_truth(model_type)
    long_probe = truth["kv_cache"]["probe_tokens"][-1]  # tokens in the measured cache (beyond every window)
    profile = inspect(str(tiny_checkpoint(model_type)), kv_dtype="float32", max_model_len=long_probe)
    assert not [f for f in profile.findings if f.severity in ("fatal", "error")], profile.findings
    # Exact parameter count, as transformers counts it.
    assert profile.parameters.total == truth["num_parameters"]
    # Per-layer kinds.
    assert [_kind(layer) for layer in profile.layers] == [_truth_kind(k) for k in truth["layer_kinds"]]
    windows = [layer.window if layer.attention == "sliding" else None for layer in profile.layers]
    truth_windows = [w if k == "sliding" else None for w, k in zip(truth["sliding_window"], truth["layer_kinds"])]
    assert windows == truth_windows
    # KV bytes per token, measured from a real cache after a forward (MLA: the cached latent).
    kv = truth["kv_cache"]
    if model_type not in KV_MEASUREMENT_DIFFERS:
        assert profile.memory.kv_bytes_per_token == kv["kv_bytes_per_token"]
        # The whole cache of one sequence at the probe length (windows capped, plus fixed state), within 2%.
        # transformers keeps window-1 tokens in a sliding layer between steps; the plan counts the window that a
        # decode step holds (and engines allocate), so add that one token per capped layer to the measurement.
        one_more = sum(layer["kv_bytes_per_token"] for layer in kv["per_layer"]
                       if layer["capped_tokens"] is not None and layer["capped_tokens"] < long_probe)  # fmt: skip
        measured = kv["measured_total_bytes_at_long_probe"] + one_more
        assert profile.memory.kv_bytes_per_sequence == pytest.approx(measured, rel=0.02)
    # Weights: header bytes vs the parameters' storage (buffers included on both sides), within 2%.
    assert profile.memory.weights_bytes == pytest.approx(truth["safetensors_bytes"], rel=0.02)
    # Fixed recurrent state per sequence, within 2%.
    assert profile.memory.state_bytes_per_sequence == pytest.approx(kv["state_bytes_per_sequence"], rel=0.02, abs=1)
    if truth["moe"]:
        assert profile.moe is not None and profile.moe.num_experts == truth["moe"]["num_experts"]
        assert profile.moe.top_k == truth["moe"]["top_k"]
    if model_type in FEATURES:
        assert FEATURES[model_type] <= set(profile.features), set(profile.features)
