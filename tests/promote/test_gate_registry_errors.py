"""What the registry and the gate say when the database or the run folder cannot be used: the file named, and the
hint a user acts on, for each SQLite failure (by its error name, and by its message where Python gives no name)."""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing
from dataclasses import replace
from pathlib import Path

import pytest

from onboard.errors import InputError
from onboard.promote import promote
from onboard.promote.promote import build_record, evaluate_revision
from onboard.promote.registry import (
    ENV_REGISTRY,
    AlreadyPromoted,
    Registry,
    RegistryError,
    _db_error,
    _switch_to_wal,
    already_promoted,
)
from tests.promote.workspaces import REV_A, SLUG, make_workspace

DB = Path("/srv/onboard/registry.sqlite3")


def _named(name: str, text: str = "disk I/O error") -> sqlite3.Error:
    exc = sqlite3.OperationalError(text)
    exc.sqlite_errorname = name  # what sqlite3 sets on errors raised by the library (Python >= 3.11)
    return exc


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("SQLITE_CANTOPEN", "the folder must exist and be writable"),
        ("SQLITE_READONLY_DIRECTORY", "the registry (or its folder) is read-only"),
        ("SQLITE_FULL", "the disk is full"),
        ("SQLITE_IOERR_WRITE", "the disk failed a read or write"),
        ("SQLITE_BUSY", "another process holds the registry"),
        ("SQLITE_NOTADB", "that file is not an onboard registry"),
        ("SQLITE_CORRUPT_VTAB", "the registry file is damaged"),
        ("SQLITE_SOMETHING_NEW", "check the path and rerun"),
    ],
)
def test_sqlite_error_names_map_to_hints(name, hint):
    error = _db_error(_named(name), DB)
    assert isinstance(error, RegistryError) and isinstance(error, InputError)
    assert error.message == f"registry {DB}: disk I/O error"
    assert error.hint.startswith(hint)


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("attempt to write a readonly database", "the registry (or its folder) is read-only"),
        ("database or disk is full", "the disk is full"),
        ("unable to open database file", "the folder must exist and be writable"),
        ("database is locked", "another process holds the registry"),
        ("file is not a database", "that file is not an onboard registry"),
        ("no such table: promotions", "check the path and rerun"),
    ],
)
def test_errors_without_a_name_are_recognised_by_their_message(text, hint):
    error = _db_error(sqlite3.OperationalError(text), DB)  # raised by Python, not SQLite: no sqlite_errorname
    assert error.message == f"registry {DB}: {text}"
    assert error.hint.startswith(hint)


def test_registry_under_a_file_is_refused_before_sqlite_runs(tmp_path):
    make_workspace(tmp_path)
    (tmp_path / "plain").write_text("x")
    with pytest.raises(RegistryError) as bad:
        promote(SLUG, tmp_path, registry=tmp_path / "plain" / "r.sqlite3", by="alice")
    assert bad.value.message == (
        f"cannot create the registry {tmp_path / 'plain' / 'r.sqlite3'}: {tmp_path / 'plain'} is a file, not a folder"
    )
    assert "ONBOARD_REGISTRY" in bad.value.hint


def test_registry_folder_is_created_on_first_write(tmp_path):
    make_workspace(tmp_path)
    db = tmp_path / "new" / "deeper" / "registry.sqlite3"
    assert promote(SLUG, tmp_path, registry=db, by="alice").record.id == 1
    assert db.is_file() and Registry(db).latest(SLUG).revision == REV_A


def test_promotion_lock_that_cannot_be_created_names_it(tmp_path):
    rev = make_workspace(tmp_path)
    (rev / "promotion.lock").mkdir()  # something in the way of the lock file
    with pytest.raises(InputError) as bad:
        promote(SLUG, tmp_path, by="alice")
    assert bad.value.message.startswith(f"cannot create the promotion lock {rev / 'promotion.lock'}: ")


def test_already_promoted_names_the_record_and_how_to_see_it(tmp_path):
    make_workspace(tmp_path)
    first = promote(SLUG, tmp_path, by="alice").record
    with pytest.raises(AlreadyPromoted) as again:
        promote(SLUG, tmp_path, by="bob")
    assert again.value.message == (
        f"acme/tiny-chat at {REV_A} is already promoted (record #1, by alice at {first.promoted_at})"
    )
    assert again.value.hint == "see it with: onboard registry show acme/tiny-chat"
    duplicate = build_record(SLUG, tmp_path, evaluate_revision(SLUG, tmp_path), "carol")
    with pytest.raises(AlreadyPromoted) as raced:  # the registry's own check, below the gate's
        Registry(tmp_path / "onboarding" / "registry.sqlite3").add(duplicate, expect_latest=1)
    assert raced.value.message == (
        f"acme/tiny-chat at {REV_A} is already promoted (record #1, by alice at {first.promoted_at})"
    )
    assert raced.value.hint == f"see it with: onboard registry show acme/tiny-chat --revision {REV_A[:12]}"


def test_a_retried_write_of_a_landed_attempt_adds_nothing(tmp_path):
    """One attempt id is one record: a write replayed under another revision (the attempt's UNIQUE key, not the
    registry's own model+revision check, stops it) is refused as already promoted, and the registry keeps one."""
    make_workspace(tmp_path)
    reg = Registry(tmp_path / "onboarding" / "registry.sqlite3")
    landed = reg.add(build_record(SLUG, tmp_path, evaluate_revision(SLUG, tmp_path), "alice"), expect_latest=None)
    replay = replace(landed, revision="f" * 40)
    with pytest.raises(AlreadyPromoted) as refused:
        reg.add(replay, expect_latest=landed.id)
    assert refused.value.message == f"acme/tiny-chat at {'f' * 40} is already promoted (by a concurrent promotion)"
    assert refused.value.hint == f"see it with: onboard registry show acme/tiny-chat --revision {'f' * 12}"
    assert [r.id for r in reg.list()] == [landed.id]


def test_the_watch_service_asks_the_default_registry_and_never_creates_it(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_REGISTRY, raising=False)
    monkeypatch.chdir(tmp_path)
    assert already_promoted("acme/tiny-chat", REV_A) is False  # <cwd>/onboarding/registry.sqlite3, absent
    assert not (tmp_path / "onboarding").exists()
    make_workspace(tmp_path)
    promote(SLUG, tmp_path, by="alice")
    assert already_promoted("acme/tiny-chat", REV_A) and already_promoted(SLUG, REV_A)
    monkeypatch.setenv(ENV_REGISTRY, str(tmp_path / "elsewhere.sqlite3"))
    assert already_promoted("acme/tiny-chat", REV_A) is False


def test_the_registry_is_a_write_ahead_log_database(tmp_path):
    """WAL: readers (`registry list`, the watch service) never block a promotion's write, nor it them."""
    make_workspace(tmp_path)
    promote(SLUG, tmp_path, by="alice")
    with closing(sqlite3.connect(tmp_path / "onboarding" / "registry.sqlite3")) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


class _Switching:
    """A connection whose `PRAGMA journal_mode=WAL` fails with `errors` first, as SQLite fails it while another
    process is turning the same new file into WAL (its busy handler does not wait for that lock)."""

    def __init__(self, *errors: str) -> None:
        self.errors, self.calls = list(errors), 0

    def execute(self, sql: str) -> None:
        self.calls += 1
        assert sql.upper() == "PRAGMA JOURNAL_MODE=WAL"
        if self.errors:
            raise sqlite3.OperationalError(self.errors.pop(0))


def test_a_concurrent_switch_to_wal_is_waited_out_in_short_steps():
    conn = _Switching("database is locked", "database is locked")
    start = time.monotonic()
    _switch_to_wal(conn, timeout_s=30.0)
    assert conn.calls == 3
    assert time.monotonic() - start < 1.0  # retried soon after the other switch, not after the timeout


def test_a_switch_to_wal_locked_past_the_timeout_fails():
    conn = _Switching(*["database is locked"] * 1000)
    start = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        _switch_to_wal(conn, timeout_s=0.2)
    assert time.monotonic() - start >= 0.2 and 1 < conn.calls < 1000


def test_any_other_error_of_the_switch_fails_at_once():
    conn = _Switching("disk I/O error", "disk I/O error")
    with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
        _switch_to_wal(conn, timeout_s=30.0)
    assert conn.calls == 1
