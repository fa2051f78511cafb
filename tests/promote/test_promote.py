"""`promote` and the registry: records, refusals naming open items, new revisions, clean I/O errors."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from contextlib import closing

import pytest

from onboard.promote import (
    AlreadyPromoted,
    PromotionConflict,
    PromotionRefused,
    Registry,
    already_promoted,
    promote,
)
from tests.promote.workspaces import REV_A, REV_B, SLUG, make_workspace

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "ONBOARD_USER": "ci-bot"}


def onboard(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "onboard", *args], capture_output=True, text=True, env=env or ENV, timeout=120)  # fmt: skip


def test_promote_appends_a_full_record(tmp_path):
    rev = make_workspace(tmp_path)
    out = promote(SLUG, tmp_path, by="alice")
    rec = out.record
    assert (rec.id, rec.model, rec.revision, rec.promoted_by) == (1, "acme/tiny-chat", REV_A, "alice")
    assert {f.path for f in rec.files} == {
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    }
    assert all(f.sha256 and len(f.sha256) == 64 for f in rec.files)
    assert rec.profile_sha256 and rec.tokenizer_sha256 and rec.golden_sha256
    assert len(rec.checks) == 23 and all(c.passed for c in rec.checks)
    assert rec.checklist["serving_parity"] == "done" and rec.checklist["goldens_match_promoted"] == "not_applicable"
    assert {s.item for s in rec.signoffs} == {"licence_reviewed", "model_card_read"}
    assert rec.versions["onboard"] and "torch" in rec.versions
    assert rec.hardware["validated_on"]["performance.hardware"]["gpu"] == "NVIDIA L4"
    assert json.loads((rev / "promotion.json").read_text())["attempt"] == rec.attempt
    assert not (rev / "promotion.pending").exists()
    reg = Registry(tmp_path / "onboarding" / "registry.sqlite3")
    assert reg.show("acme/tiny-chat") == rec and reg.show(SLUG, REV_A[:8]) == rec
    assert already_promoted("acme/tiny-chat", REV_A, reg.path) and not already_promoted(
        "acme/tiny-chat", REV_B, reg.path
    )
    with pytest.raises(AlreadyPromoted, match="already promoted \\(record #1, by alice"):
        promote(SLUG, tmp_path)


@pytest.mark.parametrize(
    ("stage", "check", "item"),
    [("verify-tokenizer", "tokenizer_parity", "tokenizer_verified"), ("validate", "logit_parity", "serving_parity")],
)
def test_seeded_failures_block_promotion_and_are_named(tmp_path, stage, check, item):
    make_workspace(tmp_path, failing={stage: (check,)})
    r = onboard("promote", SLUG, "--workspace", str(tmp_path), "--json")
    assert r.returncode == 1, r.stderr
    assert f"not ready: 1 required item(s) open: {item} (failed)" in r.stderr
    assert r.stderr.count("Error:") == 1 and "Traceback" not in r.stderr
    assert json.loads(r.stdout)["blocking"] == [item]
    assert (
        not (tmp_path / "onboarding" / "registry.sqlite3").exists()
        or Registry(tmp_path / "onboarding" / "registry.sqlite3").list() == []
    )


def test_cli_promote_then_registry_list_and_show(tmp_path):
    make_workspace(tmp_path)
    ws = ["--workspace", str(tmp_path)]
    assert onboard("promote", SLUG, *ws, "--dry-run").returncode == 0
    r = onboard("promote", SLUG, *ws)
    assert r.returncode == 0, r.stderr
    assert f"Promoted acme/tiny-chat at {REV_A} as record #1 (by ci-bot" in r.stderr
    r = onboard("registry", "list", *ws)
    assert r.returncode == 0 and "acme/tiny-chat" in r.stdout and "23/23" in r.stdout
    rows = json.loads(onboard("registry", "list", *ws, "--json").stdout)
    assert rows[0]["revision"] == REV_A
    shown = json.loads(onboard("registry", "show", "acme/tiny-chat", *ws, "--json").stdout)
    assert shown["revision"] == REV_A and shown["promoted_by"] == "ci-bot"
    r = onboard("registry", "show", "acme/other", *ws)
    assert r.returncode == 2 and "Error: no promotion of acme/other" in r.stderr


def test_new_revision_is_promoted_only_after_matching_the_promoted_goldens(tmp_path):
    make_workspace(tmp_path, revision=REV_A)
    first = promote(SLUG, tmp_path, revision=REV_A).record
    make_workspace(tmp_path, revision=REV_B, skip={"golden": ("goldens_match_promoted",)})
    with pytest.raises(PromotionRefused, match="goldens_match_promoted \\(open\\)"):
        promote(SLUG, tmp_path, revision=REV_B)
    rev_b = make_workspace(tmp_path, revision=REV_B, failing={"golden": ("goldens_match_promoted",)})
    with pytest.raises(PromotionRefused, match="goldens_match_promoted \\(failed\\)"):
        promote(SLUG, tmp_path, revision=REV_B)
    data = json.loads((rev_b / "golden.json").read_text())
    data["checks"][-1]["passed"] = True
    data["promoted_golden_sha256"] = first.golden_sha256
    (rev_b / "golden.json").write_text(json.dumps(data))
    second = promote(SLUG, tmp_path, revision=REV_B).record
    assert second.supersedes == first.id and second.checklist["goldens_match_promoted"] == "done"


def test_model_promoted_meanwhile_is_a_conflict(tmp_path):
    from onboard.promote.promote import build_record, evaluate_revision

    make_workspace(tmp_path, revision=REV_A)
    ev = evaluate_revision(SLUG, tmp_path, revision=REV_A)
    record = build_record(SLUG, tmp_path, ev, "alice")
    reg = Registry(tmp_path / "onboarding" / "registry.sqlite3")
    reg.add(record, expect_latest=None)
    other = build_record(SLUG, tmp_path, ev, "bob")
    with pytest.raises(AlreadyPromoted):
        reg.add(other, expect_latest=None)
    object.__setattr__(other, "revision", REV_B)  # a second revision checked before the first landed
    with pytest.raises(PromotionConflict, match="was promoted \\(record #1\\)"):
        reg.add(other, expect_latest=None)
    assert len(reg.list()) == 1


def _expect_clean_exit_2(r: subprocess.CompletedProcess, *words: str) -> None:
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.startswith("Error: ") and "\nHint: " in r.stderr and "Traceback" not in r.stderr
    for w in words:
        assert w in r.stderr


def test_registry_under_a_file_gives_a_clean_error(tmp_path):
    make_workspace(tmp_path)
    (tmp_path / "plain-file").write_text("x")
    r = onboard("promote", SLUG, "--workspace", str(tmp_path), "--registry", str(tmp_path / "plain-file" / "r.db"))
    _expect_clean_exit_2(r, "plain-file", "not a folder")


def test_registry_that_is_not_a_database_gives_a_clean_error(tmp_path):
    make_workspace(tmp_path)
    bogus = tmp_path / "bogus.sqlite3"
    bogus.write_bytes(b"this is not sqlite" * 100)
    _expect_clean_exit_2(
        onboard("registry", "list", "--registry", str(bogus)), "bogus.sqlite3", "not an onboard registry"
    )


def test_registry_in_a_read_only_folder_gives_a_clean_error(tmp_path):
    make_workspace(tmp_path)
    ro = tmp_path / "ro"
    ro.mkdir()
    env = dict(ENV)
    prefix: list[str] = []
    if os.geteuid() == 0:
        # Root ignores permission bits through CAP_DAC_OVERRIDE. Drop that capability (and DAC_READ_SEARCH) for the
        # command alone: it stays uid 0, so the clone stays readable wherever it lives (a 0700 temp dir, a home),
        # while the 0555 folder becomes unwritable to it. No permission of the clone or its parents is touched.
        caps = "-dac_override,-dac_read_search,-fowner"
        prefix = ["setpriv", f"--inh-caps={caps}", f"--bounding-set={caps}", "--"]
        probe = tmp_path / "probe-ro"
        probe.mkdir(mode=0o555)
        if not shutil.which("setpriv") or subprocess.run([*prefix, "touch", str(probe / "x")]).returncode == 0:
            pytest.skip("running as root and setpriv cannot drop CAP_DAC_OVERRIDE here: a read-only folder cannot be "
                        "simulated; run this test as a non-root user to check it")  # fmt: skip
    ro.chmod(0o555)
    cmd = [*prefix, sys.executable, "-m", "onboard", "promote", SLUG, "--workspace", str(tmp_path), "--registry",
           str(ro / "registry.sqlite3")]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    _expect_clean_exit_2(r, str(ro / "registry.sqlite3"))
    assert "permission" in r.stderr.lower() or "read-only" in r.stderr.lower()


@pytest.fixture
def tiny_disk(tmp_path):
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96k", "tmpfs", str(mnt)],
                                           capture_output=True).returncode != 0:  # fmt: skip
        pytest.skip("cannot mount a small tmpfs here (needs root and mount rights) to simulate a full disk")
    yield mnt
    subprocess.run(["umount", str(mnt)], check=False)


def test_full_disk_gives_a_clean_error_and_records_nothing(tmp_path, tiny_disk):
    rev = make_workspace(tmp_path / "ws")
    data = json.loads((rev / "validate.json").read_text())
    data["checks"][0]["detail"] = "x" * 400_000  # the record no longer fits on the disk
    (rev / "validate.json").write_text(json.dumps(data))
    db = tiny_disk / "registry.sqlite3"
    r = onboard("promote", SLUG, "--workspace", str(tmp_path / "ws"), "--registry", str(db))
    _expect_clean_exit_2(r, "registry.sqlite3")
    assert "full" in r.stderr.lower()
    if db.exists():
        with closing(sqlite3.connect(db)) as conn:
            assert conn.execute("SELECT COUNT(*) FROM promotions").fetchone()[0] == 0


def test_cli_signoff_unblocks_promotion(tmp_path):
    make_workspace(tmp_path, signoffs=("licence_reviewed",))
    ws = ["--workspace", str(tmp_path)]
    r = onboard("promote", SLUG, *ws)
    assert r.returncode == 1 and "model_card_read (open)" in r.stderr
    r = onboard("signoff", SLUG, "serving_parity", "--by", "eve", *ws)
    assert r.returncode == 2 and "a sign-off cannot stand in" in r.stderr
    r = onboard("signoff", SLUG, "model_card_read", "--by", "eve", *ws)
    assert r.returncode == 0 and "required items still open: none" in r.stderr
    r = onboard("promote", SLUG, *ws, "--json")
    assert r.returncode == 0, r.stderr
    record = json.loads(r.stdout)["record"]
    assert {"item": "model_card_read", "by": "eve"}.items() <= next(
        s for s in record["signoffs"] if s["item"] == "model_card_read"
    ).items()
