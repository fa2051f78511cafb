"""Seeded defects in bfloat16 and float16 (and float32 where a defect is only visible there) fail their named check,
while the generated adapter — a second, correct implementation — passes in the same dtypes.

Candidates are scored teacher-forced on the golden sequences and their greedy continuations read off those rows
(tests/fidelity/reruns.py, TeacherForced): one forward per prompt, so every dtype of every defect stays affordable.
"""

from __future__ import annotations

import pytest

from onboard.reference import load_transformers
from onboard.validate_serving.run import validate
from onboard.validate_serving.runtime import InProcessCandidate, load_candidate
from tests.fidelity.defects import DEFECTS, LOW_PRECISION
from tests.fidelity.reruns import TeacherForced

CASES = [pytest.param(d, dtype, id=f"{d.model}-{d.name}-{dtype}") for d in DEFECTS for dtype in d.dtypes]
CLEAN = [pytest.param(m, dtype, id=f"{m}-{dtype}") for m in ("trained", "llama", "gemma2", "qwen3_moe")
         for dtype in LOW_PRECISION] + [pytest.param("gemma2", "float32", id="gemma2-float32")]  # fmt: skip


def _failed(result: dict) -> dict[str, str]:
    return {c["name"]: c["detail"] for c in result["checks"] if c["required"] and not c["passed"]}


@pytest.mark.parametrize("defect, dtype", CASES)
def test_seeded_defect_fails_its_named_check(fidelity, defect, dtype) -> None:
    golden = fidelity.golden(defect.model)
    path = fidelity.defective(defect)
    model = load_transformers(path, dtype)
    if defect.wrap is not None:
        model = defect.wrap(model)
    candidate = TeacherForced(InProcessCandidate(model, path, dtype, kind="adapter", hf=True), golden)
    result = validate(golden, candidate, performance=False, only=frozenset())
    failed = _failed(result)
    checks = {c["name"]: c["detail"] for c in result["checks"]}
    assert defect.check in failed, f"{defect.name} in {dtype} passed {defect.check}: {checks.get(defect.check)}"


@pytest.mark.parametrize("model, dtype", CLEAN)
def test_the_generated_adapter_passes_in_the_served_dtype(fidelity, model, dtype) -> None:
    golden = fidelity.golden(model)
    path = fidelity.checkpoint(model)
    candidate = TeacherForced(load_candidate(path, dtype, runtime="adapter"), golden)
    assert candidate.info.kind == "adapter"
    result = validate(golden, candidate, performance=False, only=frozenset())
    assert result["passed"], _failed(result)
