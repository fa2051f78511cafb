"""The report reads quantize-plan.json through msgspec structs: a wrong shape names the field, a right one renders."""

from __future__ import annotations

import json
from pathlib import Path

from onboard.quantize.report import PLAN_FILE, section

UNIT = {"unit": "layers.0.mlp", "kind": "mlp", "layer": 0, "formats": {"bf16": {"kl": 0.0}, "int4": {"kl": 0.02}}}


def test_a_plan_renders_its_table(tmp_path: Path) -> None:
    plan = {"sensitivity": [UNIT], "units": [{"unit": "layers.0.mlp", "format": "int8", "kl_alone": 0.001}],
            "bytes": 1000, "bf16_bytes": 4000, "predicted_kl": 0.001, "measured_kl": 0.0012,
            "uniform_best": {"format": "int8", "bytes": 2000, "measured_kl": 0.002}}  # fmt: skip
    (tmp_path / PLAN_FILE).write_text(json.dumps(plan))
    plots, tables, missing = section(tmp_path)
    assert missing == [] and len(plots) == 1
    rows = tables[0][2]
    assert rows[0][:4] == ("layers.0.mlp", "int8", "0.001", "0.02")
    assert rows[-1][1] == "int8" and rows[-1][4] == "2,000 B"


def test_a_wrong_shape_is_a_missing_line_naming_the_field(tmp_path: Path) -> None:
    (tmp_path / PLAN_FILE).write_text(json.dumps({"sensitivity": [{**UNIT, "kind": 3}]}))
    plots, tables, missing = section(tmp_path)
    assert (plots, tables) == ([], [])
    assert (
        len(missing) == 1 and "at `$.sensitivity[0].kind`" in missing[0] and "rerun onboard quantize-plan" in missing[0]
    )
