"""Seeded defects for the dtype-calibrated fidelity checks, each with the check that must name it.

`model`: "trained" (the committed trained Qwen3 fixture) or a sharpened random family (sharpened.py). A defect is a
config edit (None writes null: the feature switched off, not reset to its default; "rope_theta_factor" multiplies
the theta), a weight edit, or a wrapper around the loaded module (exact effects no config spells: logits x1.03).
Each is what a broken port would compute, validated against the clean checkpoint's goldens.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.validate.tiny_models import WINDOW

LOW_PRECISION = ("bfloat16", "float16")


@dataclass(frozen=True)
class Defect:
    name: str
    model: str
    check: str
    config: dict[str, Any] = field(default_factory=dict)
    weights: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    wrap: Callable[[Any], Any] | None = None
    dtypes: tuple[str, ...] = LOW_PRECISION


def scale_logits(factor: float) -> Callable[[Any], Any]:
    """Logits ×factor at the head: a dropped or doubled logit multiplier (argmax unchanged, B34)."""

    def wrap(model: Any) -> Any:
        model.lm_head.register_forward_hook(lambda _m, _i, out: out * factor)
        return model

    return wrap


def rope_theta(factor: float) -> dict[str, Any]:
    return {"rope_theta_factor": factor}


def _norm_offset_lost(tensors: dict[str, Any]) -> dict[str, Any]:
    # Gemma norms compute x * (1 + w); storing w - 1 makes the correct code compute x * w: the lost offset.
    return {k: (v - 1.0 if k.endswith("norm.weight") else v) for k, v in tensors.items()}


DEFECTS: tuple[Defect, ...] = (
    Defect("logits_x1.03", "trained", "logit_scale", wrap=scale_logits(1.03)),
    Defect("rope_theta_x100", "trained", "logit_parity", config=rope_theta(100.0)),
    Defect("rms_norm_eps_x100", "trained", "logit_parity", config={"rms_norm_eps": 1e-4}),
    Defect("logits_x1.03", "llama", "logit_scale", wrap=scale_logits(1.03)),
    Defect("rope_theta_x100", "llama", "logit_parity", config=rope_theta(100.0)),
    Defect("rope_scaling_dropped", "llama", "long_context_parity",
           config={"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}),
    Defect("rms_norm_eps_x100", "llama", "logit_parity", config={"rms_norm_eps": 1e-4}),
    Defect("norm_offset_dropped", "gemma2", "logit_parity", weights=_norm_offset_lost),
    Defect("attn_softcap_dropped", "gemma2", "logit_parity", config={"attn_logit_softcapping": None}),
    Defect("final_softcap_dropped", "gemma2", "logit_parity", config={"final_logit_softcapping": None}),
    Defect("sliding_window_off_by_one", "gemma2", "long_context_parity", config={"sliding_window": WINDOW - 1}),
    Defect("moe_topk_renorm_flipped", "qwen3_moe", "logit_parity", config={"norm_topk_prob": False}),
    Defect("gelu_tanh_to_exact", "gemma2", "logit_parity", config={"hidden_activation": "gelu", "hidden_act": "gelu"},
           dtypes=("float32",)),
)  # fmt: skip
