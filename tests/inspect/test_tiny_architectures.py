"""`onboard inspect` on tiny checkpoints of real architectures vs transformers' own answer (tests/tiny).

The inspector reads only config.json and safetensors headers; the ground truth loads the model and runs it:
num_parameters(), the mixer modules of each layer, and the bytes of a real KV cache after a forward.
"""

from __future__ import annotations

import pytest

from onboard.inspect_checkpoint import inspect
from onboard.inspect_checkpoint.families import known_model_types
from onboard.inspect_checkpoint.features import FEATURES as DOCUMENTED
from onboard.inspect_checkpoint.registry import KNOWN_GAPS, VERIFIED
from tests.tiny.configs import TINY
from tests.tiny.fixtures import tiny_checkpoint, tiny_ground_truth  # noqa: F401  (session fixtures)
from tests.tiny.tiny_more import EXCLUDED
from tests.tiny.tiny_wrappers import ALL_WRAPPERS

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
    "flint": {"attention_sinks", "qk_norm", "sliding_window"},  # its sinks are stored as `softmax_offset`
    "mimo_v2_flash": {"attention_sinks"},  # ... and as `attention_sink_bias`
    "cohere_compass_text": {"parallel_residual", "layernorm"},  # one input norm; attention and MLP read it
    "cohere2_moe": {"parallel_residual", "moe"},
    "minicpm3": {"mla", "residual_scaling", "logit_scaling", "embedding_scaling"},  # scale_depth, dim_model_base
    "biogpt": {"absolute_positions", "embedding_scaling", "layernorm"},  # scale_embedding: sqrt(hidden)
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
    """Every architecture inspect claims to be verified on has a tiny checkpoint, and the other way round; a family
    with known gaps is checked too but not called verified."""
    untested = (VERIFIED | set(KNOWN_GAPS)) - set(TINY)
    assert not untested, (
        f"{sorted(untested)} are in onboard/inspect_checkpoint/registry.py without a tiny "
        "checkpoint: add them to tests/tiny/configs.py (or drop them from VERIFIED / KNOWN_GAPS)"
    )
    unlisted = set(TINY) - VERIFIED - set(KNOWN_GAPS)
    assert not unlisted, f"{sorted(unlisted)} have tiny checkpoints: add them to VERIFIED in registry.py"
    assert not VERIFIED & set(KNOWN_GAPS), "a family with known gaps is not verified"
    assert REQUIRED <= VERIFIED


def test_every_family_with_an_expectation_is_known():
    unknown = set(FEATURES) - known_model_types()
    assert not unknown, (
        f"{sorted(unknown)} missing from onboard/data/families.json: run scripts/build_family_catalog.py"
    )


def test_every_decoder_of_transformers_has_a_tiny_config():
    """TINY, the multimodal WRAPPERS and the documented exclusions cover every causal-LM model_type of the installed
    transformers: a new decoder family fails here until it gets a tiny config (tests/tiny/tiny_more.py) or a reason
    in EXCLUDED."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    installed = set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
    built = set(TINY) | set(ALL_WRAPPERS)
    assert not installed - built - set(EXCLUDED), sorted(installed - built - set(EXCLUDED))
    assert not built & set(EXCLUDED) and not set(TINY) & set(ALL_WRAPPERS)
    assert not set(EXCLUDED) - installed, "EXCLUDED names a model_type transformers no longer has"


def compare_with_transformers(profile, truth, model_type: str) -> dict[str, bool]:
    """Each fact of the profile against transformers' own model: name -> matches."""
    kv = truth["kv_cache"]
    measured = bool(kv["per_layer"]) and "nothing measured" not in " ".join(truth["notes"])
    long_probe = kv["probe_tokens"][-1]
    truth_windows = [w if k == "sliding" else None for w, k in zip(truth["sliding_window"], truth["layer_kinds"])]
    # transformers keeps window-1 tokens in a sliding layer between steps; the plan counts the window that a decode
    # step holds (and engines allocate), so add that one token per capped layer to the measurement.
    one_more = sum(layer["kv_bytes_per_token"] for layer in kv["per_layer"]
                   if layer["capped_tokens"] is not None and layer["capped_tokens"] < long_probe)  # fmt: skip
    checks = {
        "parameters": profile.parameters.total == truth["num_parameters"],
        "layer_kinds": [_kind(layer) for layer in profile.layers] == [_truth_kind(k) for k in truth["layer_kinds"]],
        "windows": [layer.window if layer.attention == "sliding" else None for layer in profile.layers]
        == truth_windows,
        # Header bytes vs the parameters' storage (buffers included on both sides), within 2%.
        "weights_bytes": profile.memory.weights_bytes == pytest.approx(truth["safetensors_bytes"], rel=0.02),
        # MoE reported exactly where transformers' model has experts, with their count and top-k.
        "moe": (profile.moe is None) == (truth["moe"] is None) and (
            truth["moe"] is None or (profile.moe.num_experts, profile.moe.top_k)
            == (truth["moe"]["num_experts"], truth["moe"]["top_k"])),
        "tied_embeddings": profile.tie_word_embeddings == truth["tie_word_embeddings"],
        # MLA reported only where the model caches a latent (kv_lora_rank), and then with its size.
        "mla": ("mla" in profile.features) == (truth["mla"] is not None),
    }  # fmt: skip
    if model_type not in KV_MEASUREMENT_DIFFERS:
        # A cache nobody could weigh is not a match: the family must name it as a gap.
        checks["kv_bytes_per_token"] = measured and profile.memory.kv_bytes_per_token == kv["kv_bytes_per_token"]
        total = kv["measured_total_bytes_at_long_probe"] + one_more
        checks["kv_bytes_per_sequence"] = measured and profile.memory.kv_bytes_per_sequence == pytest.approx(
            total, rel=0.02
        )
        checks["state_bytes_per_sequence"] = measured and profile.memory.state_bytes_per_sequence == pytest.approx(
            kv["state_bytes_per_sequence"], rel=0.02, abs=1
        )
    return checks


@pytest.mark.slow
@pytest.mark.parametrize("model_type", sorted(TINY))
def test_profile_matches_transformers(model_type, tiny_checkpoint, tiny_ground_truth):  # noqa: F811
    truth = tiny_ground_truth(model_type)
    long_probe = truth["kv_cache"]["probe_tokens"][-1]  # tokens in the measured cache (beyond every window)
    profile = inspect(str(tiny_checkpoint(model_type)), kv_dtype="float32", max_model_len=long_probe)
    assert not [f for f in profile.findings if f.severity in ("fatal", "error")], profile.findings
    checks = compare_with_transformers(profile, truth, model_type)
    wrong = {name for name, ok in checks.items() if not ok}
    # Exactly the documented gaps differ: a new mismatch fails, and so does a gap that has closed.
    assert wrong == set(KNOWN_GAPS.get(model_type, {})), (wrong, truth["notes"])
    if model_type in KNOWN_GAPS:
        assert any(f.code == "inspect-known-gap" for f in profile.findings)
    if model_type in FEATURES:
        assert FEATURES[model_type] <= set(profile.features), set(profile.features)
    undocumented = [f for f in profile.features if f not in DOCUMENTED and not f.startswith(("rope:", "quantized:"))]
    assert not undocumented, f"features missing from onboard/inspect_checkpoint/features.py FEATURES: {undocumented}"
    # A checkpoint of a known family, as transformers saves it, holds nothing new to that family: a "tensors not in"
    # line here is a false novelty claim on the first thing a day-zero report says.
    assert profile.novelty[0].split(" ")[0] == profile.model_type, profile.novelty  # gpt-sw3 saves model_type gpt2
    new_tensors = [line for line in profile.novelty if line.startswith("tensors not in")]
    assert not new_tensors, f"{new_tensors}: rebuild onboard/data/families.json (scripts/build_family_catalog.py)"


# Expert counts set in config, yet no layer carries experts: transformers builds dense MLPs, inspect says dense.
DENSE_VARIANTS = [("qwen3_moe", {"mlp_only_layers": [0, 1]}), ("hy_v3", {"mlp_layer_types": ["dense", "dense"]})]


@pytest.mark.parametrize(("model_type", "overrides"), DENSE_VARIANTS, ids=[m for m, _ in DENSE_VARIANTS])
def test_moe_disabled_by_config_is_dense(tmp_path, model_type, overrides):
    from tests.tiny.factory import make_tiny_checkpoint
    from tests.tiny.ground_truth import ground_truth

    folder = make_tiny_checkpoint(model_type, tmp_path / model_type, overrides=overrides)
    truth = ground_truth(model_type, folder)
    profile = inspect(str(folder), kv_dtype="float32", max_model_len=truth["kv_cache"]["probe_tokens"][-1])
    assert truth["moe"] is None and profile.moe is None and "moe" not in profile.features
    assert {layer.mlp for layer in profile.layers} == {"dense"}
    assert any(f.code == "moe-without-experts" for f in profile.findings)
    assert profile.parameters.total == truth["num_parameters"]


def test_minicpm_multipliers_are_the_ones_its_forward_applies(tiny_checkpoint):  # noqa: F811
    """MiniCPM scales each residual branch by scale_depth / sqrt(num_hidden_layers) and the head's input by
    dim_model_base / hidden_size (MiniCPM3 in transformers): the profile reports those factors, not the raw keys."""
    import json
    import math

    path = tiny_checkpoint("minicpm3")
    config = json.loads((path / "config.json").read_text())
    m = inspect(str(path)).multipliers
    assert m.residual_multiplier == pytest.approx(config["scale_depth"] / math.sqrt(config["num_hidden_layers"]))
    assert m.logit_scale == pytest.approx(config["dim_model_base"] / config["hidden_size"])
