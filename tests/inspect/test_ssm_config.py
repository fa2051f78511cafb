"""The SSM mixer facts inspect reads from config.json (ssm_config.py), against the mixer transformers builds from the
same config: every Mamba family's names for the same knobs, the biases, the dt clamp, and the lint staying quiet
about the keys it now reads."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from onboard.inspect_checkpoint import inspect, profile_from_parts
from onboard.inspect_checkpoint.summary import describe_ssm
from tests.tiny.factory import make_tiny_checkpoint, make_tiny_config

SSM_FAMILIES = ["mamba", "falcon_mamba", "mamba2", "jamba", "bamba", "granitemoehybrid", "falcon_h1", "nemotron_h",
                "zamba", "zamba2"]  # fmt: skip
# Families onboard composes adapters for: inspect must read every SSM key their config.json holds.
COMPOSED = ["mamba", "falcon_mamba", "mamba2", "jamba", "bamba", "granitemoehybrid", "nemotron_h"]


def _mixer(model_type: str, overrides: dict | None = None):  # type: ignore[no-untyped-def]
    import torch
    from transformers import AutoModelForCausalLM

    config = make_tiny_config(model_type, overrides)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return config, next(m for m in model.modules() if hasattr(m, "ssm_state_size"))


@pytest.mark.parametrize("model_type", SSM_FAMILIES)
def test_ssm_facts_equal_the_transformers_mixer(model_type: str) -> None:
    config, mixer = _mixer(model_type)
    ssm = profile_from_parts(json.loads(config.to_json_string()), None).ssm
    assert ssm is not None
    assert (ssm.state_size, ssm.conv_kernel, ssm.inner_size) == (
        mixer.ssm_state_size, mixer.conv_kernel_size, mixer.intermediate_size)  # fmt: skip
    assert ssm.activation == mixer.activation
    assert ssm.conv_bias == (mixer.conv1d.bias is not None)
    assert ssm.proj_bias == (mixer.in_proj.bias is not None)
    if ssm.version == 2:
        assert (ssm.num_heads, ssm.head_dim, ssm.n_groups) == (mixer.num_heads, mixer.head_dim, mixer.n_groups)
        low, high = mixer.time_step_limit
        expected = None if low <= 0 and math.isinf(high) else (low, None if math.isinf(high) else high)
        assert ssm.dt_limit == expected
    else:
        assert ssm.dt_rank == mixer.time_step_rank and not hasattr(mixer, "time_step_limit")
    assert ssm.bc_norm_eps == getattr(mixer, "rms_eps", None)


@pytest.mark.parametrize("model_type", COMPOSED)
def test_no_ssm_key_is_reported_unknown(model_type: str) -> None:
    config = json.loads(make_tiny_config(model_type).to_json_string())
    profile = profile_from_parts(config, None)
    unknown = [f.message for f in profile.findings if f.code == "config-unknown-field"]
    assert unknown == [], unknown


def test_options_that_change_the_scan_are_read_and_shown() -> None:
    cases = {
        "mamba2": ({"time_step_limit": [0.001, 0.1], "use_conv_bias": False}, "dt clamped to [0.001, 0.1]"),
        "falcon_mamba": ({"mixer_rms_eps": 1e-5}, "RMS-normed B, C, dt (eps 1e-05)"),
        "mamba": ({"residual_in_fp32": True, "time_step_rank": "auto"}, "float32 residual"),
    }
    for model_type, (overrides, shown) in cases.items():
        config = json.loads(make_tiny_config(model_type).to_json_string()) | overrides
        ssm = profile_from_parts(config, None).ssm
        assert ssm is not None and shown in describe_ssm(ssm), describe_ssm(ssm)
    config = json.loads(make_tiny_config("mamba2").to_json_string())
    assert profile_from_parts(config | {"time_step_limit": [0.001, 0.1]}, None).ssm.dt_limit == (0.001, 0.1)
    # transformers writes the upper bound as a tagged float: no clamp at all, and a lower bound alone.
    inf = {"__float__": "Infinity"}
    assert profile_from_parts(config | {"time_step_limit": [0.0, inf]}, None).ssm.dt_limit is None
    assert profile_from_parts(config | {"time_step_limit": [0.01, inf]}, None).ssm.dt_limit == (0.01, None)
    # "auto" is the reference code's ceil(hidden / 16)
    mamba = json.loads(make_tiny_config("mamba").to_json_string()) | {"time_step_rank": "auto"}
    assert profile_from_parts(mamba, None).ssm.dt_rank == math.ceil(mamba["hidden_size"] / 16)


def test_a_malformed_dt_limit_is_a_named_type_finding() -> None:
    config = json.loads(make_tiny_config("mamba2").to_json_string()) | {"time_step_limit": "0-inf"}
    profile = profile_from_parts(config, None)
    assert profile.ssm.dt_limit is None
    found = [f.message for f in profile.findings if f.code == "config-field-type"]
    assert any("time_step_limit" in m for m in found), found


def test_zamba2_clamps_dt_from_time_step_min() -> None:
    config, mixer = _mixer("zamba2", {"time_step_min": 0.002})
    ssm = profile_from_parts(json.loads(config.to_json_string()), None).ssm
    assert mixer.time_step_limit == (0.002, math.inf) and ssm.dt_limit == (0.002, None)


def test_bamba_without_attention_indices_is_all_mamba() -> None:
    # BambaConfig: attn_layer_indices null means no attention layer (every layer a Mamba-2 mixer).
    config = json.loads(make_tiny_config("bamba").to_json_string()) | {"attn_layer_indices": None}
    profile = profile_from_parts(config, None)
    assert {layer.attention for layer in profile.layers} == {"ssm"} and profile.ssm is not None


def test_no_ssm_facts_without_ssm_layers() -> None:
    assert profile_from_parts(json.loads(make_tiny_config("llama").to_json_string()), None).ssm is None


def test_config_bias_that_the_weights_contradict_is_a_warning(tmp_path: Path) -> None:
    path = make_tiny_checkpoint("mamba", tmp_path / "mamba")
    assert not [f for f in inspect(str(path)).findings if f.code == "ssm-bias-mismatch"]
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps(config | {"use_conv_bias": False, "use_bias": True}))
    found = {f.message for f in inspect(str(path)).findings if f.code == "ssm-bias-mismatch"}
    assert len(found) == 2, found
    assert any("stores a conv1d.bias" in m for m in found) and any("stores no in_proj.bias" in m for m in found)


def test_falcon_h1_multipliers_and_norm_equal_its_modules() -> None:
    """Falcon-H1's muP multipliers and its optional gated norm, read into the profile, against the modules
    transformers builds from the same config (non-default values, so a key read under the wrong name shows)."""
    import torch
    from transformers import AutoModelForCausalLM

    overrides = {"ssm_multipliers": [0.5, 1.5, 2.0, 0.25, 3.0], "ssm_in_multiplier": 0.7, "ssm_out_multiplier": 0.3,
                 "attention_in_multiplier": 0.9, "attention_out_multiplier": 1.1, "key_multiplier": 0.6,
                 "mlp_multipliers": [1.2, 0.8], "mamba_rms_norm": True, "mamba_norm_before_gate": False}  # fmt: skip
    config = make_tiny_config("falcon_h1", overrides)
    with torch.device("meta"):
        layer = AutoModelForCausalLM.from_config(config).model.layers[0]
    profile = profile_from_parts(json.loads(config.to_json_string()), None)
    ssm, m = profile.ssm, profile.multipliers
    assert (ssm.in_multiplier, ssm.out_multiplier) == (layer.mamba.ssm_in_multiplier, layer.ssm_out_multiplier)
    assert ssm.zxbcdt_multipliers == tuple(config.ssm_multipliers)
    assert ssm.gated_norm == layer.mamba.mamba_rms_norm and ssm.norm_before_gate == layer.mamba.norm.norm_before_gate
    assert (m.attention_in_multiplier, m.attention_out_multiplier) == (layer.attention_in_multiplier,
                                                                       layer.attn_out_multiplier)  # fmt: skip
    assert m.key_multiplier == layer.self_attn.key_multiplier
    assert m.mlp_multipliers == (layer.feed_forward.gate_multiplier, layer.feed_forward.down_multiplier)
    assert "z, x, B, C, dt ×(0.5, 1.5, 2, 0.25, 3)" in describe_ssm(ssm) and "gate, then norm" in describe_ssm(ssm)
    assert [f.message for f in profile.findings if f.code == "config-unknown-field"] == []
    from transformers import AutoConfig

    plain = profile_from_parts(json.loads(AutoConfig.for_model("falcon_h1").to_json_string()), None).ssm
    assert not plain.gated_norm and plain.zxbcdt_multipliers is None  # the defaults: no norm, all multipliers 1
