"""First divergence on sharpened tiny checkpoints: seeded adapter-side defects (each in a copy of a committed
adapter) and a reference-side defect are each localised to their layer and module, with the likely cause; clean
adapters show no divergence at any point."""

from __future__ import annotations

import json

import pytest
import torch

from onboard.generate_adapter.divergence import locate, projection_names
from onboard.generate_adapter.divergence_stages import parity_divergence
from onboard.generate_adapter.parity import check_parity, load_adapter, prompts, reference_model
from onboard.generate_adapter.regenerate import ADAPTERS_DIR
from tests.divergence.conftest import DEFECT_FAMILY, seed_adapter
from tests.generate.conftest import REQUIRED_ARCHS

# defect -> (layer, module, words the likely cause must contain)
EXPECTED = {
    "norm_offset": (0, "input_norm", "norm offset missing"),
    "rope_theta": (0, "attention", "rope theta"),
    "qk_norm": (0, "attention", "missing QK-norm"),
    "softcap": (0, "attention", "softcap"),
    "topk_norm": (0, "mlp", "MoE top-k normalisation"),  # after the router point, which agrees
}


def _longest_prompt(checkpoint) -> torch.Tensor:
    return prompts(json.loads((checkpoint / "config.json").read_text()))[-1]


def _before(result: dict, first: dict) -> list[dict]:
    rows = result["per_layer_error"]
    at = next(i for i, r in enumerate(rows) if (r["layer"], r["module"]) == (first["layer"], first["module"]))
    return rows[:at]


FAST = ("llama", "gemma", "gemma2", "qwen3", "qwen3_moe")  # the families of the seeded defects


@pytest.mark.parametrize(
    "model_type", [m if m in FAST else pytest.param(m, marks=pytest.mark.slow) for m in REQUIRED_ARCHS]
)
def test_clean_adapter_has_no_divergence(sharp, model_type: str) -> None:
    checkpoint = sharp(model_type)
    adapter = load_adapter(ADAPTERS_DIR / f"{model_type}.py").Model.from_pretrained(checkpoint)
    result = locate(adapter, reference_model(checkpoint, torch.float32), _longest_prompt(checkpoint))
    assert result["first_divergence"] is None, result["first_divergence"]
    assert result["only_in_adapter"] == []
    modules = [(r["layer"], r["module"]) for r in result["per_layer_error"]]
    layers = adapter.args.num_hidden_layers
    for role in ("attention", "mlp", "layer_output"):
        assert [m for m in modules if m[1] == role] == [(i, role) for i in range(layers)], role
    assert modules[0] == (None, "embedding") and modules[-2:] == [(None, "final_norm"), (None, "logits")]
    if model_type in FAST:  # separate q/k/v in transformers, fused in the adapter: split through the weight map
        assert [m for m in modules if m[1] == "self_attn.q_proj"] == [(i, "self_attn.q_proj") for i in range(layers)]
    if model_type == "qwen3_moe":  # our router is read by weight, never called: recomputed from the block's input
        assert (0, "router") in modules
    assert max(r["rel"] for r in result["per_layer_error"]) < 1e-5


@pytest.mark.parametrize("defect", list(EXPECTED))
def test_adapter_defect_is_localised(sharp, seeded, defect: str) -> None:
    model_type = DEFECT_FAMILY[defect]
    clean = check_parity(ADAPTERS_DIR / f"{model_type}.py", sharp(model_type))
    assert clean["passed"] and "first_divergence" not in clean  # the bisect runs only on a failure
    result = check_parity(seeded(defect), sharp(model_type))
    assert result["passed"] is False and result["compared_in"] == "float32"
    first = result["first_divergence"]
    layer, module, cause = EXPECTED[defect]
    assert (first["layer"], first["module"]) == (layer, module), result["divergence"]
    assert any(cause in c for c in first["likely_cause"]), first["likely_cause"]
    assert all(r["rel"] <= r["tolerance"] for r in _before(result, first))
    assert f"first divergence at layer {layer} {module}" in result["detail"]


def test_missing_qk_norm_is_named(sharp, seeded) -> None:
    result = check_parity(seeded("qk_norm"), sharp("qwen3"))
    assert {"layers.0.q_norm", "layers.0.k_norm", "layers.1.q_norm"} <= set(result["only_in_reference"])


def test_window_off_by_one_shows_past_the_window(sharp, tmp_path) -> None:
    edit = ("            sliding_window=window,\n", "            sliding_window=window + 1 if window else None,\n")
    result = check_parity(seed_adapter(tmp_path, "mistral", [edit]), sharp("mistral"))
    first = result["first_divergence"]
    assert (first["layer"], first["module"]) == (0, "attention")
    assert "only positions ≥ 16 diverge" in first["likely_cause"][0]  # the tiny window is 16


def test_reference_side_defect_is_localised(sharp) -> None:
    """A modeling-code-only difference: the reference's layer 1 attention output x1.05 (nothing in the config or
    the tensors shows it)."""
    checkpoint = sharp("llama")
    reference = reference_model(checkpoint, torch.float32)
    reference.model.layers[1].self_attn.register_forward_hook(lambda _m, _a, out: (out[0] * 1.05, *out[1:]))
    result = check_parity(ADAPTERS_DIR / "llama.py", checkpoint, reference=reference)
    assert result["passed"] is False
    first = result["first_divergence"]
    assert (first["layer"], first["module"]) == (1, "attention")
    assert first["likely_cause"] == ["ratio ≈ constant (adapter/reference = 0.9524): a scale or multiplier"]


@pytest.mark.parametrize("defect", ["norm_offset", "rope_theta", "qk_norm"])
def test_bfloat16_parity_failure_is_localised_in_float32(sharp, seeded, defect: str) -> None:
    """Served in bf16 (a bf16 checkpoint, the adapter in bf16): parity fails there, and the bisect localises in
    float32, where rounding cannot hide a defect (divergence_stages)."""
    result = check_parity(seeded(defect), sharp(DEFECT_FAMILY[defect], "bfloat16"), dtype="bfloat16")
    assert result["passed"] is False and result["compared_in"] == "float32"
    first = result["first_divergence"]
    assert (first["layer"], first["module"]) == EXPECTED[defect][:2]


def test_low_precision_stage_finds_an_overflow_and_nothing_on_a_clean_adapter(sharp, tmp_path) -> None:
    """float32 agrees everywhere, so the served dtype is compared: where float16 overflows (layer 0's MLP made
    hot), and nowhere on a clean bfloat16 run (the reference's own bf16 error is the yardstick)."""
    import shutil

    from safetensors.torch import load_file, save_file

    model = load_adapter(ADAPTERS_DIR / "llama.py").Model
    clean = sharp("llama")
    result = parity_divergence(model, clean, None, _longest_prompt(clean), "bfloat16")
    assert result["compared_in"] == "bfloat16" and result["first_divergence"] is None, result["divergence"]
    assert any(r["tolerance"] > 2e-2 for r in result["per_layer_error"])  # noise-calibrated, above the floor

    hot = tmp_path / "hot"
    shutil.copytree(clean, hot)
    tensors = load_file(str(hot / "model.safetensors"))
    tensors["model.layers.0.mlp.down_proj.weight"] *= 3e5  # MLP output ~1e5 > float16's 65504
    save_file(tensors, str(hot / "model.safetensors"), metadata={"format": "pt"})
    result = parity_divergence(model, hot, None, _longest_prompt(hot), "float16")
    first = result["first_divergence"]
    assert result["compared_in"] == "float16" and (first["layer"], first["module"]) == (0, "mlp")
    assert first["rel"] is None and first["nonfinite"] > 0  # inf is null in JSON; the count says why
    assert "overflow" in first["likely_cause"][0]
    json.dumps(result, allow_nan=False)


def test_projection_names_come_from_the_weight_map() -> None:
    names = projection_names(load_adapter(ADAPTERS_DIR / "llama.py").Model)
    assert names[:4] == ("self_attn.qkv_proj", "mlp.gate_up_proj", "self_attn.q_proj", "self_attn.k_proj")
