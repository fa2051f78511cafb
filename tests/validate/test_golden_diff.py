"""`onboard golden diff OLD NEW`: value by value, exit 1 on a difference, 2 on a folder that is not goldens."""

from __future__ import annotations

import json
from pathlib import Path

from onboard.validate_serving.golden import read_golden, record
from onboard.validate_serving.golden_diff import diff_goldens
from tests.validate.conftest import LONG_CAP, NEW_TOKENS
from tests.validate.test_cli_validate import onboard
from tests.validate.tiny_models import edit_config


def test_goldens_recorded_again_are_the_same(tiny, tmp_path: Path) -> None:
    old = tiny.golden("qwen3")
    record(str(tiny.checkpoint("qwen3")), tmp_path / "again", max_new_tokens=NEW_TOKENS, calibrate=(),
           max_long_tokens=LONG_CAP)  # fmt: skip
    out = onboard("golden", "diff", str(old.folder), str(tmp_path / "again"), "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    diff = json.loads(out.stdout)
    assert diff["passed"] is True and diff["differences"] == []
    assert diff["compared_positions"] == sum(len(p.rows) for p in old.prompts)
    assert {p["status"] for p in diff["prompts"]} == {"match"}
    text = onboard("golden", "diff", str(old.folder), str(tmp_path / "again"), cwd=tmp_path)
    assert text.returncode == 0 and "golden diff: SAME" in text.stderr


def test_a_changed_checkpoint_differs_value_by_value(tiny, tmp_path: Path) -> None:
    changed = edit_config(tiny.checkpoint("qwen3"), tmp_path / "qwen3-eps", rms_norm_eps=0.5)
    record(str(changed), tmp_path / "new", max_new_tokens=NEW_TOKENS, calibrate=(), max_long_tokens=LONG_CAP)
    out = onboard("golden", "diff", str(tiny.golden("qwen3").folder), str(tmp_path / "new"), "--json", cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    diff = json.loads(out.stdout)
    assert diff["passed"] is False and any("max logprob error" in d for d in diff["differences"])
    assert any(n.startswith("weights_fingerprint:") for n in diff["notes"])  # context, not a difference
    assert "Error: the goldens differ" in out.stderr and "Hint:" in out.stderr


def test_a_longer_long_prompt_is_compared_on_the_shared_prefix(tiny, tmp_path: Path) -> None:
    """Another --max-long-tokens makes the long prompt longer, not different: its shared prefix must still match."""
    record(str(tiny.checkpoint("qwen3")), tmp_path / "longer", max_new_tokens=NEW_TOKENS, calibrate=(),
           max_long_tokens=LONG_CAP + 24)  # fmt: skip
    diff = diff_goldens(tiny.golden("qwen3"), read_golden(tmp_path / "longer"))
    assert diff.passed, diff.differences
    long = next(p for p in diff.prompts if p.name == "long")
    assert long.status == "match" and long.positions == LONG_CAP - 1


def test_not_a_golden_folder_exits_2(tiny, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    out = onboard("golden", "diff", str(tiny.golden("qwen3").folder), str(tmp_path / "empty"), cwd=tmp_path)
    assert out.returncode == 2 and "not a golden folder" in out.stderr and "Hint:" in out.stderr
    assert "Traceback" not in out.stderr
