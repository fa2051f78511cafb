"""Reading quantize-plan.json back: the fields later stages use (`onboard convert gguf --plan`, `onboard validate
--plan`, the onboarding report), decoded by msgspec so that a wrong shape is an error naming the file and field.
Importing this module imports no torch.
"""

from __future__ import annotations

import re
from pathlib import Path

import msgspec

from onboard.errors import InputError
from onboard.quantize.units import KIND_ORDER

PLAN_FILE = "quantize-plan.json"
_REDO = "pass the quantize-plan.json that `onboard quantize-plan` wrote, or run it again"
# units.unit_name: `embedding` (`embedding+head` when tied), `head`, or `layer.N.KIND[.PART]`.
_UNIT = re.compile(rf"embedding(\+head)?|head|layer\.\d+\.(?:{'|'.join(KIND_ORDER)})(?:\.[a-z_]+)?")


class ChosenUnit(msgspec.Struct):
    """One unit of the plan and the format chosen for it."""

    unit: str
    format: str
    kl_alone: float | None = None


class PlanFile(msgspec.Struct):
    """The fields of quantize-plan.json that stages after quantize-plan read."""

    units: list[ChosenUnit]
    budget_kl: float | None = None
    measured_kl: float | None = None


def read_plan(path: Path) -> PlanFile:
    """quantize-plan.json at `path`; InputError naming the file and field when it is not one plan.py could write."""
    from onboard.fsutil import read_json
    from onboard.quantize.formats import FORMATS  # torch: only the stages that quantize or serve read a plan this way

    plan = read_json(path, PlanFile, _REDO)
    for i, chosen in enumerate(plan.units):
        if not _UNIT.fullmatch(chosen.unit):
            raise InputError(
                f"{path}: $.units[{i}].unit {chosen.unit!r} is not a unit quantize-plan names "
                "(embedding, embedding+head, head, layer.N.attn.qkv ...)",
                _REDO,
            )
        if chosen.format not in FORMATS:
            raise InputError(
                f"{path}: $.units[{i}].format {chosen.format!r} is not a known format ({', '.join(FORMATS)})", _REDO
            )
    return plan
