"""A sliding window on a model_type nobody registered, without layer_types: assumed the way transformers' own
families read it (Mistral: every layer; Qwen2: `use_sliding_window` and `max_window_layers`), with a warning that
says so. Ignoring it built a full-attention adapter for a Mistral re-shipped as repository code, which diverged past
the window (parity 1.59); with the assumption, parity against the repository's code is 1.2e-6."""

from __future__ import annotations

import pytest

from onboard.inspect_checkpoint.config_view import ConfigView
from onboard.inspect_checkpoint.layer_plan import plan_layers

BASE = {"num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4}


def _plan(**config):
    layers, findings = plan_layers(ConfigView({**BASE, **config}), 4, False, None, None)
    return [(layer.attention, layer.window) for layer in layers], {f.code: f for f in findings}


def test_mistral_convention_on_an_unregistered_model_type() -> None:
    kinds, findings = _plan(model_type="dayzero_mistral", sliding_window=16)
    assert kinds == [("sliding", 16)] * 4
    assert "window-layers-assumed" in findings and "every layer" in findings["window-layers-assumed"].message
    assert findings["window-layers-assumed"].severity == "warning"


@pytest.mark.parametrize(
    ("use", "expected"), [(False, [("full", None)] * 4), (True, [("full", None)] * 2 + [("sliding", 8)] * 2)]
)
def test_qwen2_convention_when_use_sliding_window_is_present(use: bool, expected) -> None:
    kinds, _ = _plan(model_type="dayzero_qwen2", sliding_window=8, use_sliding_window=use, max_window_layers=2)
    assert kinds == expected


def test_registered_families_keep_their_own_rules() -> None:
    kinds, findings = _plan(model_type="qwen2", sliding_window=8, use_sliding_window=False)
    assert kinds == [("full", None)] * 4 and "window-layers-assumed" not in findings
    kinds, findings = _plan(model_type="dayzero_x", sliding_window=8, layer_types=["full_attention"] * 4)
    assert kinds == [("full", None)] * 4 and "window-layers-assumed" not in findings
