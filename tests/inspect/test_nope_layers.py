"""Which layers rotate queries and keys (RoPE) and which do not (NoPE), against transformers running the model.

The truth is observed, not declared: every `apply_rotary*` function of the family's modelling module is wrapped to
record the decoder layer it was called from during one forward of the tiny checkpoint. Families that mark NoPE
layers each their own way: a per-layer list (SmolLM3's interval), per layer-type RoPE parameters with None for a type
(Ergo, new in transformers 5.25, and Cohere Compass), a modelling rule with no config key (Kolibri's global NoPE in
hybrid models, Kolibri 1.1's sliding-only rotation); Llama 4's chunked/global split; Llama as the all-RoPE control.
"""

from __future__ import annotations

import importlib
from unittest import mock

import pytest

from onboard.inspect_checkpoint import inspect
from tests.tiny.fixtures import tiny_checkpoint  # noqa: F401  (session fixture)
from tests.tiny.ground_truth import decoder_layers

FAMILIES = ["cohere_compass_text", "ergo", "kolibri1", "kolibri1_1", "llama", "llama4_text", "smollm3"]


def layers_applying_rope(folder) -> list[bool]:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=False).eval()
    modelling = importlib.import_module(type(model).__module__)
    rotary = {name: fn for name, fn in vars(modelling).items() if name.startswith("apply_rotary") and callable(fn)}
    assert rotary, f"{modelling.__name__} has no apply_rotary* function to observe"
    layers = decoder_layers(model)
    current: list[int] = []
    rotated: set[int] = set()

    def recording(fn):
        def wrapper(*args, **kwargs):
            rotated.add(current[-1])
            return fn(*args, **kwargs)

        return wrapper

    hooks = [layer.register_forward_pre_hook(lambda _m, _a, i=i: current.append(i)) for i, layer in enumerate(layers)]
    try:
        with mock.patch.multiple(modelling, **{name: recording(fn) for name, fn in rotary.items()}), torch.no_grad():
            model(input_ids=torch.randint(3, 1000, (1, 8)))
    finally:
        for hook in hooks:
            hook.remove()
    return [i in rotated for i in range(len(layers))]


@pytest.mark.slow
@pytest.mark.parametrize("model_type", FAMILIES)
def test_rope_per_layer_matches_the_modelling_code(model_type: str, tiny_checkpoint) -> None:  # noqa: F811
    folder = tiny_checkpoint(model_type)
    truth = layers_applying_rope(folder)
    profile = inspect(str(folder), kv_dtype="float32", max_model_len=64)
    assert [layer.rope for layer in profile.layers] == truth


def test_llama4_temperature_tuning_and_qk_norm_are_read_not_misread() -> None:
    """Llama 4's attn_scale is the NoPE layers' query temperature (with floor_scale), not an attention multiplier;
    its use_qk_norm is a weightless L2 norm no tensor shows; every key it sets is read."""
    import json

    from onboard.inspect_checkpoint import profile_from_parts
    from tests.tiny.factory import make_tiny_config

    config = json.loads(make_tiny_config("llama4_text").to_json_string())
    profile = profile_from_parts(config, None)
    assert profile.multipliers.attention_multiplier is None and "attention_multiplier" not in profile.features
    assert profile.multipliers.nope_temperature == (float(config["floor_scale"]), config["attn_scale"])
    assert {"nope_temperature", "qk_norm", "chunked_attention"} <= set(profile.features)
    assert profile.norms.qk_norm == "weightless"
    assert [f.message for f in profile.findings if f.code == "config-unknown-field"] == []
    off = profile_from_parts(config | {"attn_temperature_tuning": False, "use_qk_norm": False}, None)
    assert off.multipliers.nope_temperature is None and off.norms.qk_norm is None
