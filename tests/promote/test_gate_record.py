"""The promotion gate in process: which items keep a run out of the registry, what a record holds (hashes, checks,
sign-offs, versions, where it was validated), how an interrupted promotion is finished, and what the registry
answers (list, show, latest, already_promoted). The CLI paths are in test_promote.py; these run in the test's own
process, so each assertion is about the gate itself.
"""

from __future__ import annotations

import fcntl
import json
import re
import sqlite3
from contextlib import closing
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from onboard.errors import InputError
from onboard.promote import promote
from onboard.promote import record as records
from onboard.promote.promote import (
    PENDING,
    RECORD,
    PromotionBusy,
    PromotionRefused,
    build_record,
    evaluate_revision,
    source_files,
)
from onboard.promote.registry import (
    ENV_REGISTRY,
    PromotionConflict,
    Registry,
    RegistryError,
    default_registry_path,
)
from tests.promote.workspaces import REV_A, REV_B, SLUG, STAGE_CHECKS, make_workspace

MODEL = "acme/tiny-chat"


def _registry(ws: Path) -> Registry:
    return Registry(ws / "onboarding" / "registry.sqlite3")


def _rewrite(file: Path, **changes) -> None:
    file.write_text(json.dumps({**json.loads(file.read_text()), **changes}))


# The gate: what keeps a run out


def test_refusal_lists_every_open_item_and_records_nothing(tmp_path):
    rev = make_workspace(
        tmp_path, failing={"validate": ("logit_parity",)}, skip={"validate": ("stop_set",)}, signoffs=()
    )
    with pytest.raises(PromotionRefused) as refused:
        promote(SLUG, tmp_path, by="alice")
    blocking = {it.id: it.status for it in refused.value.state.blocking}
    assert blocking["serving_parity"] == "failed"
    assert blocking["licence_reviewed"] == "open" and blocking["model_card_read"] == "open"
    assert f"{SLUG} at {REV_A} is not ready: {len(blocking)} required item(s) open: " in refused.value.message
    assert "serving_parity (failed)" in refused.value.message and "licence_reviewed (open)" in refused.value.message
    assert blocking["stop_set"] == "open"  # a check that never ran keeps its item open, never done
    assert refused.value.hint.startswith(f"see {tmp_path / 'checklists' / SLUG}.md for evidence")
    assert _registry(tmp_path).list() == []
    assert not (rev / RECORD).exists() and not (rev / PENDING).exists()


def test_a_run_whose_every_item_is_done_is_promoted_once(tmp_path):
    make_workspace(tmp_path)
    out = promote(SLUG, tmp_path, by="alice")
    assert out.state.ready and not out.state.blocking and out.resumed is False
    assert out.record_path == tmp_path / "onboarding" / SLUG / REV_A / RECORD
    assert json.loads(out.record_path.read_text())["id"] == out.record.id == 1


def test_busy_when_another_promote_holds_the_revision(tmp_path):
    rev = make_workspace(tmp_path)
    with open(rev / "promotion.lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(PromotionBusy, match="another `onboard promote`") as busy:
            promote(SLUG, tmp_path, by="alice")
    assert busy.value.hint == "wait for it to finish; its result will be in `onboard registry list`"
    assert promote(SLUG, tmp_path, by="alice").record.id == 1  # released: the next one goes through


# What a record holds


def test_record_carries_hashes_checks_signoffs_and_where_it_was_validated(tmp_path):
    rev = make_workspace(tmp_path)
    _rewrite(rev / "verify-tokenizer.json", tool_version="0.9.1", tokenizer_sha256="ab" * 32)
    rec = promote(SLUG, tmp_path, by="alice").record
    assert (rec.slug, rec.source, rec.supersedes, rec.notes) == (SLUG, str(tmp_path / "tiny-chat"), None, ())
    assert rec.profile_sha256 == records.sha256_file(rev / "profile.json")
    assert rec.golden_sha256 == records.sha256_tree(tmp_path / "golden_outputs" / SLUG)
    assert rec.golden_dir == str(tmp_path / "golden_outputs" / SLUG)
    assert rec.tokenizer_sha256 == "ab" * 32  # the stage's own hash wins over one combined from the files
    sizes = {f.path: f.size for f in rec.files}
    assert sizes["model.safetensors"] == (tmp_path / "tiny-chat" / "model.safetensors").stat().st_size
    checks = {(c.stage, c.name): c for c in rec.checks}
    assert checks[("validate", "stop_set")].detail == "stop_set: ok" and checks[("validate", "stop_set")].required
    assert rec.checklist["licence_reviewed"] == "signed_off"
    assert {(s.item, s.by, s.at) for s in rec.signoffs} == {
        ("licence_reviewed", "alice", "2026-12-01T10:00:00+00:00"),
        ("model_card_read", "alice", "2026-12-01T10:00:00+00:00"),
    }
    assert rec.versions["verify-tokenizer.tool_version"] == "0.9.1"
    assert "generate.tool_version" not in rec.versions  # the stage recorded none
    assert rec.hardware["validated_on"] == {
        "candidate": {"name": "tiny-chat", "kind": "vllm", "dtype": "bfloat16"},
        "performance.hardware": {"gpu": "NVIDIA L4", "count": 1},
        "performance.versions": {"vllm": "0.32.0"},
        "performance.dtype": "bfloat16",
    }
    assert rec.hardware["promoted_on"]["hostname"]


def test_record_keeps_the_figures_behind_a_check(tmp_path):
    """validate --load's conditions (check_data) travel with serving_under_load into the registry record."""
    rev = make_workspace(tmp_path)
    validate = json.loads((rev / "validate.json").read_text())
    load = {"name": "serving_under_load", "passed": True, "required": True, "detail": "52 requests: ok"}
    figures = {"conditions": [{"name": "concurrency 32", "requests": 32, "passed": True}], "retried": [3]}
    _rewrite(
        rev / "validate.json",
        checks=[*validate["checks"], load],
        check_data={"serving_under_load": figures, "stop_set": "not a dict"},
    )
    rec = promote(SLUG, tmp_path, by="alice").record
    assert {c.name: c.data for c in rec.checks if c.data} == {"serving_under_load": figures}
    stored = {c.name: c for c in _registry(tmp_path).latest(MODEL).checks}
    assert stored["serving_under_load"].data == figures and stored["serving_under_load"].detail == "52 requests: ok"


def test_validated_on_keeps_what_the_validate_stage_names(tmp_path):
    rev = make_workspace(tmp_path)
    where = {"hardware": {"cpu": "x86_64"}, "target": "l4", "device": "cuda:0", "unrelated": 1}
    _rewrite(rev / "validate.json", performance="not measured", **where)
    with pytest.raises(PromotionRefused, match="performance_recorded"):  # no performance figures: not promotable
        promote(SLUG, tmp_path, by="alice")
    validated_on = build_record(SLUG, tmp_path, evaluate_revision(SLUG, tmp_path), "alice").hardware["validated_on"]
    assert validated_on == {
        "hardware": {"cpu": "x86_64"},
        "target": "l4",
        "device": "cuda:0",
        "candidate": {"name": "tiny-chat", "kind": "vllm", "dtype": "bfloat16"},
    }


def test_tokenizer_hash_falls_back_on_the_tokenizer_files(tmp_path):
    make_workspace(tmp_path)
    rec = promote(SLUG, tmp_path, by="alice").record
    expected = records.tokenizer_hash({f.path: f.sha256 for f in rec.files})
    assert expected and rec.tokenizer_sha256 == expected


def test_golden_stage_names_its_goldens(tmp_path):
    rev = make_workspace(tmp_path)
    elsewhere = tmp_path / "goldens-elsewhere"
    elsewhere.mkdir()
    (elsewhere / "a.json").write_text("{}")
    _rewrite(rev / "golden.json", golden_dir="goldens-elsewhere")  # relative: to the workspace
    rec = promote(SLUG, tmp_path, by="alice").record
    assert rec.golden_dir == str(elsewhere)
    assert rec.golden_sha256 == records.sha256_tree(elsewhere)


def test_golden_stage_recorded_hash_is_kept(tmp_path):
    rev = make_workspace(tmp_path)
    _rewrite(rev / "golden.json", golden_sha256=12345)  # not a hash: the goldens folder is hashed instead
    fallback = build_record(SLUG, tmp_path, evaluate_revision(SLUG, tmp_path), "alice").golden_sha256
    assert fallback == records.sha256_tree(tmp_path / "golden_outputs" / SLUG)
    _rewrite(rev / "golden.json", golden_sha256="cd" * 32)
    assert promote(SLUG, tmp_path, by="alice").record.golden_sha256 == "cd" * 32


def test_no_goldens_anywhere_records_none(tmp_path):
    rev = make_workspace(tmp_path)
    ev = evaluate_revision(SLUG, tmp_path)
    for f in (tmp_path / "golden_outputs" / SLUG).iterdir():
        f.unlink()
    (tmp_path / "golden_outputs" / SLUG).rmdir()
    rec = build_record(SLUG, tmp_path, ev, "alice")
    assert rec.golden_dir is None and rec.golden_sha256 is None
    assert rec.revision == REV_A and rev.name == REV_A


def test_revision_is_the_folder_name_when_the_profile_has_none(tmp_path):
    rev = make_workspace(tmp_path, revision="main")
    _rewrite(rev / "profile.json", revision="")
    assert evaluate_revision(SLUG, tmp_path).state.revision == "main"
    _rewrite(rev / "profile.json", revision=REV_B)
    assert evaluate_revision(SLUG, tmp_path).state.revision == REV_B


def test_files_manifest_in_both_shapes(tmp_path):
    rev = make_workspace(tmp_path)
    listed = {"files": [{"path": "model.safetensors", "sha256": "11" * 32, "size": 7}, {"path": "config.json"}]}
    (rev / "files.json").write_text(json.dumps(listed))
    files, notes = source_files(rev, {}, tmp_path)
    assert [(f.path, f.sha256, f.size) for f in files] == [
        ("model.safetensors", "11" * 32, 7),
        ("config.json", None, None),
    ]
    assert notes == []
    mapped = {"files": {"a.safetensors": "22" * 32, "b.safetensors": {"sha256": "33" * 32, "size": 9}}}
    (rev / "files.json").write_text(json.dumps(mapped))
    files, _ = source_files(rev, {}, tmp_path)
    assert [(f.path, f.sha256, f.size) for f in files] == [
        ("a.safetensors", "22" * 32, None),
        ("b.safetensors", "33" * 32, 9),
    ]


def test_files_manifest_of_the_wrong_shape_names_the_file(tmp_path):
    rev = make_workspace(tmp_path)
    (rev / "files.json").write_text(json.dumps({"files": [{"sha256": "x"}]}))
    with pytest.raises(InputError) as bad:
        source_files(rev, {}, tmp_path)
    assert "files.json" in str(bad.value.message) and bad.value.hint == "rerun the pipeline to rewrite it"


def test_source_not_local_gives_names_and_a_note(tmp_path):
    rev = make_workspace(tmp_path)
    profile = {"source": "acme/tiny-chat", "files": ["config.json", "model.safetensors"]}
    files, notes = source_files(rev, profile, tmp_path)
    assert [(f.path, f.sha256) for f in files] == [("config.json", None), ("model.safetensors", None)]
    assert notes == ["checkpoint files not hashed: acme/tiny-chat not local"]
    _, notes = source_files(rev, {"files": ["config.json"]}, tmp_path)
    assert notes == ["checkpoint files not hashed: source not local"]


def test_local_source_relative_to_the_workspace_is_hashed_and_missing_files_named_unhashed(tmp_path):
    rev = make_workspace(tmp_path)
    files, notes = source_files(rev, {"source": "tiny-chat", "files": ["config.json", "absent.bin"]}, tmp_path)
    assert [(f.path, f.sha256) for f in files] == [
        ("config.json", records.sha256_file(tmp_path / "tiny-chat" / "config.json")),
        ("absent.bin", None),
    ]
    assert notes == [f"1 of 2 files not hashed: not in {tmp_path / 'tiny-chat'}"]  # named, not silently left out


# A second revision, and evaluation of an already promoted one


def test_second_revision_supersedes_the_first(tmp_path):
    make_workspace(tmp_path, revision=REV_A)
    first = promote(SLUG, tmp_path, revision=REV_A, by="alice").record
    rev_b = make_workspace(tmp_path, revision=REV_B)
    _rewrite(rev_b / "golden.json", promoted_golden_sha256=first.golden_sha256)
    ev = evaluate_revision(SLUG, tmp_path, revision=REV_B)
    assert ev.previous == first
    assert {it.id: it.status for it in ev.state.items}["goldens_match_promoted"] == "done"
    second = promote(SLUG, tmp_path, revision=REV_B, by="bob").record
    assert (second.id, second.supersedes) == (2, first.id)
    assert [s.id for s in _registry(tmp_path).list(MODEL)] == [2, 1]


def test_evaluating_the_promoted_revision_needs_no_newer_goldens(tmp_path):
    make_workspace(tmp_path)
    promote(SLUG, tmp_path, by="alice")
    state = evaluate_revision(SLUG, tmp_path).state
    assert {it.id: it.status for it in state.items}["goldens_match_promoted"] == "not_applicable"
    assert state.ready


# An interrupted promotion


def test_rerun_finishes_a_promotion_killed_after_its_commit(tmp_path):
    rev = make_workspace(tmp_path)
    ev = evaluate_revision(SLUG, tmp_path)
    landed = _registry(tmp_path).add(build_record(SLUG, tmp_path, ev, "alice"), expect_latest=None)
    (rev / PENDING).write_text(json.dumps({"attempt": landed.attempt, "model": MODEL}))
    out = promote(SLUG, tmp_path, by="bob")
    assert out.resumed is True and out.record == landed and out.record.promoted_by == "alice"
    assert json.loads((rev / RECORD).read_text())["attempt"] == landed.attempt
    assert not (rev / PENDING).exists()
    assert len(_registry(tmp_path).list()) == 1


@pytest.mark.parametrize("pending", ['{"attempt": "never-committed"}', '{"attempt": ', "{}"])
def test_a_pending_attempt_that_never_landed_is_forgotten(tmp_path, pending):
    rev = make_workspace(tmp_path)
    (rev / PENDING).write_text(pending)
    out = promote(SLUG, tmp_path, by="bob")
    assert out.resumed is False and out.record.promoted_by == "bob" and out.record.id == 1
    assert not (rev / PENDING).exists()


# The registry


def test_registry_list_counts_passed_checks_newest_first(tmp_path):
    make_workspace(tmp_path, revision=REV_A)
    ev = evaluate_revision(SLUG, tmp_path, revision=REV_A)
    reg = _registry(tmp_path)
    first = reg.add(build_record(SLUG, tmp_path, ev, "alice"), expect_latest=None)
    rows = reg.list()
    assert len(rows) == 1
    row = rows[0]
    assert (row.id, row.model, row.revision, row.promoted_by) == (1, MODEL, REV_A, "alice")
    assert (row.checks_passed, row.checks_total) == (len(first.checks), len(first.checks))
    assert reg.list("acme/other") == [] and reg.list(SLUG) == rows


def test_registry_list_counts_failed_checks_apart(tmp_path):
    make_workspace(tmp_path, failing={"validate": ("degeneration",)})
    ev = evaluate_revision(SLUG, tmp_path)
    record = build_record(SLUG, tmp_path, ev, "alice")  # built directly: the gate itself would refuse it
    _registry(tmp_path).add(record, expect_latest=None)
    row = _registry(tmp_path).list()[0]
    assert row.checks_total == len(record.checks) and row.checks_passed == row.checks_total - 1


def test_registry_tables_hold_each_file_and_check(tmp_path):
    make_workspace(tmp_path)
    rec = promote(SLUG, tmp_path, by="alice").record
    with closing(sqlite3.connect(_registry(tmp_path).path)) as conn:
        files = conn.execute("SELECT path, sha256, size FROM promotion_files WHERE promotion_id = 1").fetchall()
        checks = conn.execute("SELECT stage, name, passed, required FROM promotion_checks").fetchall()
        top = conn.execute("SELECT model, slug, revision, promoted_by, supersedes FROM promotions").fetchall()
    assert sorted(files) == sorted((f.path, f.sha256, f.size) for f in rec.files)
    assert sorted(checks) == sorted((c.stage, c.name, int(c.passed), int(c.required)) for c in rec.checks)
    assert top == [(MODEL, SLUG, REV_A, "alice", None)]


def test_registry_show_and_latest_by_model_or_slug(tmp_path):
    make_workspace(tmp_path)
    rec = promote(SLUG, tmp_path, by="alice").record
    reg = _registry(tmp_path)
    assert reg.latest(MODEL) == reg.latest(SLUG) == rec
    assert reg.show(MODEL, REV_A[:6]) == rec and reg.by_attempt(rec.attempt) == rec
    assert reg.already_promoted(SLUG, REV_A) and not reg.already_promoted(SLUG, REV_A[:6])
    with pytest.raises(InputError) as missing:
        reg.show(MODEL, REV_B[:8])
    assert missing.value.message == f"no promotion of {MODEL} at {REV_B[:8]} in {reg.path}"
    assert missing.value.hint == "list what is there: onboard registry list"
    with pytest.raises(InputError, match=f"no promotion of acme/other in {reg.path}"):
        reg.show("acme/other")


def test_a_missing_registry_is_empty_and_is_not_created(tmp_path):
    reg = Registry(tmp_path / "none" / "registry.sqlite3")
    assert reg.list() == [] and reg.latest(MODEL) is None and not reg.already_promoted(MODEL, REV_A)
    assert not reg.path.exists() and not reg.path.parent.exists()


def test_conflict_when_the_latest_promotion_moved(tmp_path):
    make_workspace(tmp_path, revision=REV_A)
    make_workspace(tmp_path, revision=REV_B)
    reg = _registry(tmp_path)
    ev_a = evaluate_revision(SLUG, tmp_path, revision=REV_A)
    ev_b = evaluate_revision(SLUG, tmp_path, revision=REV_B)
    reg.add(build_record(SLUG, tmp_path, ev_a, "alice"), expect_latest=None)
    with pytest.raises(PromotionConflict) as conflict:
        reg.add(build_record(SLUG, tmp_path, ev_b, "bob"), expect_latest=None)
    assert conflict.value.message == f"{MODEL} was promoted (record #1) while {REV_B} was being checked"
    assert conflict.value.hint == "rerun the golden comparison against the newly promoted goldens, then promote again"
    assert reg.add(build_record(SLUG, tmp_path, ev_b, "bob"), expect_latest=1).id == 2


def test_default_registry_path_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_REGISTRY, raising=False)
    assert default_registry_path(tmp_path) == tmp_path / "onboarding" / "registry.sqlite3"
    monkeypatch.setenv(ENV_REGISTRY, str(tmp_path / "shared.sqlite3"))
    assert default_registry_path(tmp_path) == tmp_path / "shared.sqlite3"


def test_a_file_that_is_not_a_registry_is_named_with_a_hint(tmp_path):
    bogus = tmp_path / "bogus.sqlite3"
    bogus.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(RegistryError) as bad:
        Registry(bogus).list()
    assert str(bogus) in bad.value.message and bad.value.hint.startswith("that file is not an onboard registry")


def test_record_time_attempt_and_checks_are_those_of_this_promotion(tmp_path):
    make_workspace(tmp_path, failing={"validate": ("degeneration",)})
    ev = evaluate_revision(SLUG, tmp_path)
    before = datetime.now(timezone.utc).replace(microsecond=0)
    one, two = (build_record(SLUG, tmp_path, ev, "alice") for _ in range(2))
    at = datetime.fromisoformat(one.promoted_at)
    assert at.utcoffset() == timedelta(0) and at.microsecond == 0  # UTC, to the second
    assert before <= at <= datetime.now(timezone.utc)
    assert re.fullmatch("[0-9a-f]{32}", one.attempt) and one.attempt != two.attempt  # one id per attempt
    checks = {(c.stage, c.name): (c.passed, c.required, c.detail) for c in one.checks}
    assert len(checks) == len(one.checks)
    assert {(s, n) for s, names in STAGE_CHECKS.items() for n in names} <= set(checks)  # every check the stages ran
    assert checks[("inspect", "inspect_no_errors")] == (True, True, "0 findings, no errors")  # derived from the profile
    assert checks[("validate", "degeneration")] == (False, True, "degeneration: FAILED")
    assert checks[("generate", "adapter_parity")] == (True, True, "adapter_parity: ok")
    assert one.checklist["serving_parity"] == "done" and one.promoted_by == "alice"


def test_record_of_a_profile_without_source_or_files_and_no_validated_on(tmp_path):
    rev = make_workspace(tmp_path)
    profile = json.loads((rev / "profile.json").read_text())
    del profile["source"], profile["files"]
    (rev / "profile.json").write_text(json.dumps(profile))
    validate = json.loads((rev / "validate.json").read_text())
    del validate["candidate"], validate["performance"]
    (rev / "validate.json").write_text(json.dumps(validate))
    rec = build_record(SLUG, tmp_path, evaluate_revision(SLUG, tmp_path), "alice")
    assert (rec.source, rec.revision) == (SLUG, REV_A)  # the slug stands for a source the profile does not name
    assert rec.files == () and rec.notes == ("checkpoint files not hashed: source not local",)
    assert rec.hardware["validated_on"] is None and rec.hardware["promoted_on"]["hostname"]


def test_profile_hash_is_of_the_file_that_holds_the_inspect_result(tmp_path):
    rev = make_workspace(tmp_path)
    (rev / "profile.json").rename(rev / "inspect.json")  # the inspect stage's other file name (STAGE_FILES)
    rec = build_record(SLUG, tmp_path, evaluate_revision(SLUG, tmp_path), "alice")
    assert rec.profile_sha256 == records.sha256_file(rev / "inspect.json") and rec.source == str(tmp_path / "tiny-chat")
    (rev / "inspect.json").unlink()  # a run folder (its checklist.json) without an inspect result
    assert (rev / "checklist.json").is_file()
    rec = build_record(SLUG, tmp_path, evaluate_revision(SLUG, tmp_path), "alice")
    assert (rec.profile_sha256, rec.source, rec.revision) == (None, SLUG, REV_A)


@pytest.mark.parametrize("key", ["golden_dir", "dir", "path"])
def test_golden_stage_names_its_goldens_by_any_of_its_keys(tmp_path, key):
    rev = make_workspace(tmp_path)
    named = tmp_path / "goldens-named"
    named.mkdir()
    (named / "a.json").write_text('{"tokens": [7]}')
    _rewrite(rev / "golden.json", **{key: str(named)})  # absolute: taken as it is
    rec = build_record(SLUG, tmp_path, evaluate_revision(SLUG, tmp_path), "alice")
    assert (rec.golden_dir, rec.golden_sha256) == (str(named), records.sha256_tree(named))


def test_golden_dir_key_comes_first_and_a_non_text_value_is_ignored(tmp_path):
    rev = make_workspace(tmp_path)
    _rewrite(rev / "golden.json", golden_dir=7, dir="first-text", path="second-text")
    rec = build_record(SLUG, tmp_path, evaluate_revision(SLUG, tmp_path), "alice")
    assert rec.golden_dir == str(tmp_path / "first-text")
    _rewrite(rev / "golden.json", golden_dir=None, dir=None, path=None)  # none named: the workspace's default
    rec = build_record(SLUG, tmp_path, evaluate_revision(SLUG, tmp_path), "alice")
    assert rec.golden_dir == str(tmp_path / "golden_outputs" / SLUG)


def test_signoff_notes_are_kept_in_the_record(tmp_path):
    rev = make_workspace(tmp_path)
    entries = [
        {"item": "licence_reviewed", "by": "alice", "at": "2026-12-01T10:00:00+00:00", "note": "Apache-2.0, checked"},
        {"item": "model_card_read", "by": "bob", "at": "2026-12-01T11:00:00+00:00", "note": ""},
    ]
    (rev / "signoffs.json").write_text(json.dumps({"signoffs": entries}))
    rec = promote(SLUG, tmp_path, by="carol").record
    assert [(s.item, s.by, s.at, s.note) for s in rec.signoffs] == [tuple(e.values()) for e in entries]


def test_a_checkpoint_file_that_cannot_be_read_names_the_folder(tmp_path, monkeypatch):
    rev = make_workspace(tmp_path)

    def unreadable(path):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(records, "sha256_file", unreadable)
    with pytest.raises(InputError) as bad:
        source_files(rev, {"source": "tiny-chat", "files": ["config.json"]}, tmp_path)
    assert bad.value.message == f"cannot hash the checkpoint files in {tmp_path / 'tiny-chat'}: Permission denied"
