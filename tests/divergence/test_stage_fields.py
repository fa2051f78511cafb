"""The bisect's fields where stages and the report read them: validate's stage JSON when an in-process adapter fails
a fidelity check, and the report's per-layer table and plot (the row that said "not known")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from onboard.generate_adapter.parity import load_adapter
from onboard.promote.report import render_report
from onboard.validate_serving.golden import record
from onboard.validate_serving.report import summary
from onboard.validate_serving.run import validate
from onboard.validate_serving.runtime import InProcessCandidate
from tests.divergence.conftest import DEFECTS, seed_adapter
from tests.promote.workspaces import SLUG, make_workspace


@pytest.fixture(scope="module")
def llama_golden(sharp, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("divergence-golden")
    return record(str(sharp("llama")), out, max_new_tokens=4, calibrate=("float32",), max_long_tokens=48)


def _validate(checkpoint: Path, adapter_file: Path, golden) -> dict:
    model = load_adapter(adapter_file).Model.from_pretrained(checkpoint)
    candidate = InProcessCandidate(model, checkpoint, "float32", kind="adapter", hf=False)
    return validate(golden, candidate, performance=False, only=frozenset())


def test_validate_reports_where_the_adapter_diverges(sharp, llama_golden, tmp_path) -> None:
    from onboard.generate_adapter.regenerate import ADAPTERS_DIR

    clean = _validate(sharp("llama"), ADAPTERS_DIR / "llama.py", llama_golden)
    assert clean["passed"], clean["failed"]
    assert "first_divergence" not in clean  # the bisect runs only when a fidelity check fails
    seeded = seed_adapter(tmp_path, "llama", DEFECTS["rope_theta"])
    result = _validate(sharp("llama"), seeded, llama_golden)
    assert not result["passed"] and "logit_parity" in result["failed"]
    first = result["first_divergence"]
    assert (first["layer"], first["module"]) == (0, "attention")
    assert any("rope theta" in c for c in first["likely_cause"])
    assert {"layer", "module", "max_abs", "rel"} <= set(result["per_layer_error"][0])
    json.dumps(result, allow_nan=False)
    assert "  where: first divergence at layer 0 attention (rel " in summary(result)


def _stage_with_bisect(tmp_path: Path, failing: bool) -> Path:
    rev = make_workspace(tmp_path, failing={"validate": ("logit_parity",)} if failing else None)
    data = json.loads((rev / "validate.json").read_text())
    data.pop("per_layer_error", None)
    if failing:
        rows = [{"layer": None, "module": "embedding", "max_abs": 0.0, "rel": 0.0, "tolerance": 1e-4}]
        for layer in range(3):
            for module, rel in (("attention", 2e-7 if layer < 1 else 0.04), ("mlp", 3e-7 if layer < 1 else 0.05)):
                rows.append({"layer": layer, "module": module, "max_abs": rel, "rel": rel, "tolerance": 1e-4})
        rows.append({"layer": None, "module": "logits", "max_abs": 0.1, "rel": 0.06, "tolerance": 1e-4})
        first = dict(rows[3], likely_cause=["ratio ≈ constant (adapter/reference = 0.9524): a scale or multiplier"])
        data |= {"per_layer_error": rows, "first_divergence": first, "compared_in": "float32", "point_tolerance": 1e-4}
    (rev / "validate.json").write_text(json.dumps(data))
    return rev


def test_report_shows_the_table_and_the_plot(tmp_path) -> None:
    _stage_with_bisect(tmp_path, failing=True)
    paths = render_report(SLUG, tmp_path)
    html, md = paths.html.read_text(), paths.markdown.read_text()
    assert 'id="plot-layers"' in html and 'class="limit marker"' in html
    assert "first divergence: layer 1 attention" in html
    assert 'id="table-first-divergence"' in html and 'id="table-per-layer-error"' in html
    assert "| layer 1 attention | 0.04 | 0.0001 | float32 | ratio ≈ constant (adapter/reference = 0.9524)" in md
    assert "| 1 | mlp | 0.05 | 0.0001 | 2 | ← first divergence |" in md
    assert "| 0 | mlp | 3e-07 | 0.0001 | 0 |  |" in md
    assert "| logits | logits | 0.06 | 0.0001 | 1 |  |" in md
    assert "per-layer error not known" not in md


def test_report_says_why_per_layer_error_is_not_known(tmp_path) -> None:
    rev = _stage_with_bisect(tmp_path, failing=False)
    md = render_report(SLUG, tmp_path).markdown.read_text()
    assert "per-layer error not known: parity passed, and the first-divergence bisect runs only when it fails" in md
    data = json.loads((rev / "validate.json").read_text())
    data |= {"passed": False, "per_layer_error": [], "first_divergence": None,
             "divergence": "not located: no reference: model_type 'x' exists only as the repository's code"}  # fmt: skip
    (rev / "validate.json").write_text(json.dumps(data))
    md = render_report(SLUG, tmp_path).markdown.read_text()
    assert "per-layer error not known: validate.json: not located: no reference: model_type 'x'" in md
