"""Stage results and sign-offs are decoded by msgspec: a malformed entry is named by its JSON path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from onboard.errors import InputError
from onboard.promote.checklist import load_signoffs
from onboard.promote.stage_results import load_stage_results


def test_a_malformed_check_is_named_and_the_rest_kept(tmp_path: Path) -> None:
    checks = [{"name": "a", "passed": "yes"}, {"name": "b", "passed": True, "detail": "ok"}, {"passed": False}]
    (tmp_path / "generate.json").write_text(json.dumps({"passed": True, "checks": checks}))
    result = load_stage_results(tmp_path).get("generate")
    assert result is not None and [c.name for c in result.checks] == ["b"]
    assert result.checks[0].detail == "ok" and result.checks[0].required
    assert "got `str` - at `$.checks[0].passed`" in result.error
    assert "missing required field `name` - at `$.checks[2]`" in result.error


def test_a_file_that_is_not_an_object_is_reported(tmp_path: Path) -> None:
    (tmp_path / "validate.json").write_text("[1, 2]")
    (tmp_path / "golden.json").write_text("{not json")
    results = load_stage_results(tmp_path)
    assert "validate.json is not a JSON object" in results.get("validate").error
    assert "golden.json is unreadable: not JSON" in results.get("golden").error


def test_a_malformed_signoff_names_the_entry_and_field(tmp_path: Path) -> None:
    entries = [
        {"item": "licence_reviewed", "by": "ana", "at": "2026-12-03T10:00:00Z"},
        {"item": "x", "by": 3, "at": ""},
    ]
    (tmp_path / "signoffs.json").write_text(json.dumps({"signoffs": entries}))
    with pytest.raises(InputError, match=r"signoffs.json: Expected `str`, got `int` - at `\$\.signoffs\[1\]\.by`"):
        load_signoffs(tmp_path)
    (tmp_path / "signoffs.json").write_text(json.dumps({"signoffs": entries[:1]}))
    assert [s.by for s in load_signoffs(tmp_path)] == ["ana"]


def test_files_manifest_forms_and_a_malformed_one(tmp_path: Path) -> None:
    from onboard.promote.promote import source_files
    from onboard.promote.record import FileEntry

    manifest = tmp_path / "files.json"
    forms = [
        {"files": [{"path": "a.safetensors", "sha256": "ab", "size": 3}, {"path": "b.json"}]},
        {"files": {"a.safetensors": {"sha256": "ab", "size": 3}, "b.json": {}}},
    ]
    for form in forms:
        manifest.write_text(json.dumps(form))
        assert source_files(tmp_path, {}, tmp_path) == (
            (FileEntry("a.safetensors", "ab", 3), FileEntry("b.json", None, None)),
            [],
        )
    manifest.write_text(json.dumps({"files": {"a.safetensors": "ab"}}))
    assert source_files(tmp_path, {}, tmp_path)[0] == (FileEntry("a.safetensors", "ab", None),)
    manifest.write_text(json.dumps({"files": [{"sha256": "ab"}]}))
    with pytest.raises(InputError, match=r"files.json: .*missing required field `path` - at `\$\.files\[0\]`"):
        source_files(tmp_path, {}, tmp_path)
