"""No NaN in any artifact (issue 41): the one JSON writer refuses non-finite numbers naming the file and the field
path, and goldens refuse a reference output that is not finite with a named error, writing nothing."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from onboard.errors import NonFiniteValue, ReferenceUnusable
from onboard.fsutil import atomic_write_json, first_non_finite
from onboard.validate_serving.candidates import TopK
from onboard.validate_serving.golden import GoldenPrompt, write_golden


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_the_json_writer_refuses_non_finite_numbers_naming_the_field(tmp_path: Path, bad: float) -> None:
    path = tmp_path / "out.json"
    with pytest.raises(NonFiniteValue) as caught:
        atomic_write_json(path, {"noise": {"bfloat16": {"max": [0.5, bad]}}, "ok": 1})
    assert caught.value.field == "$.noise.bfloat16.max[1]" and caught.value.path == str(path)
    assert str(path) in caught.value.message and "$.noise.bfloat16.max[1]" in caught.value.message
    assert not path.exists()


def test_finite_data_is_written_and_found_clean(tmp_path: Path) -> None:
    atomic_write_json(tmp_path / "out.json", {"a": [1.5, {"b": None}], "c": "nan"})
    assert (tmp_path / "out.json").read_text().startswith("{\n")
    assert first_non_finite({"a": [1.5, {"b": None}], "c": "nan"}) is None


def _prompt(logprob: float) -> GoldenPrompt:
    return GoldenPrompt("short", "chat", "hi", (1, 2), (3,), (TopK((5, 6), (-0.1, logprob), -0.1),) * 2)


def test_goldens_refuse_a_non_finite_reference_output_and_write_nothing(tmp_path: Path) -> None:
    with pytest.raises(ReferenceUnusable, match=r"prompt 'short' .*top_logprobs\[0\]\[1\].*goldens refused"):
        write_golden(tmp_path, {"format": "onboard-golden/1"}, [_prompt(math.nan)])
    with pytest.raises(NonFiniteValue, match=r"MANIFEST\.json: refusing to write nan at \$\.noise\.float32\.max"):
        write_golden(tmp_path, {"noise": {"float32": {"max": math.nan}}}, [_prompt(-2.0)])
    assert list(tmp_path.iterdir()) == []
    write_golden(tmp_path, {"noise": {"float32": {"max": 0.01}}}, [_prompt(-2.0)])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["MANIFEST.json", "prompts.jsonl"]
