"""The promotion registry: an embedded SQLite database (WAL) of promotion records, appended atomically.

One promotion is one `BEGIN IMMEDIATE … COMMIT` over three tables: a process killed at any point leaves the whole
record or nothing. UNIQUE(model, revision) and an optimistic check on the model's latest promotion make concurrent
promotions of one model end in exactly one success.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from onboard import serde
from onboard.errors import ChecksFailed, InputError
from onboard.fsutil import os_error
from onboard.promote.record import PromotionRecord, PromotionSummary

ENV_REGISTRY = "ONBOARD_REGISTRY"
SCHEMA = """
CREATE TABLE IF NOT EXISTS promotions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    model TEXT NOT NULL,
    slug TEXT NOT NULL,
    revision TEXT NOT NULL,
    promoted_by TEXT NOT NULL,
    promoted_at TEXT NOT NULL,
    attempt TEXT NOT NULL UNIQUE,
    supersedes INTEGER REFERENCES promotions(id),
    profile_sha256 TEXT,
    tokenizer_sha256 TEXT,
    golden_sha256 TEXT,
    record_json TEXT NOT NULL,
    UNIQUE (model, revision)
);
CREATE TABLE IF NOT EXISTS promotion_files (
    promotion_id INTEGER NOT NULL REFERENCES promotions(id),
    path TEXT NOT NULL,
    sha256 TEXT,
    size INTEGER
);
CREATE TABLE IF NOT EXISTS promotion_checks (
    promotion_id INTEGER NOT NULL REFERENCES promotions(id),
    stage TEXT NOT NULL,
    name TEXT NOT NULL,
    passed INTEGER NOT NULL,
    required INTEGER NOT NULL,
    detail TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS promotion_files_id ON promotion_files (promotion_id);
CREATE INDEX IF NOT EXISTS promotion_checks_id ON promotion_checks (promotion_id);
"""
# The record's fields that are columns of `promotions` besides its id and the whole record as JSON.
_COLUMNS = tuple(
    "model slug revision promoted_by promoted_at attempt supersedes profile_sha256 tokenizer_sha256 golden_sha256".split()
)
# SQLite error name -> hint. Data so every entry point says the same thing.
_DB_HINTS = {
    "SQLITE_CANTOPEN": "the folder must exist and be writable: create it, fix permissions, or pass --registry PATH",
    "SQLITE_READONLY": "the registry (or its folder) is read-only: fix permissions or pass --registry PATH",
    "SQLITE_FULL": "the disk is full: free space and rerun (nothing was recorded)",
    "SQLITE_IOERR": "the disk failed a read or write: check free space and the file system, then rerun",
    "SQLITE_BUSY": "another process holds the registry for too long: wait for it and rerun",
    "SQLITE_LOCKED": "another process holds the registry for too long: wait for it and rerun",
    "SQLITE_NOTADB": "that file is not an onboard registry: pass --registry with the right path",
    "SQLITE_CORRUPT": "the registry file is damaged: restore it from a backup",
    "SQLITE_PERM": "no permission to use the registry: fix permissions or pass --registry PATH",
}
# Python 3.10's sqlite3 errors carry no sqlite_errorname: words of the message -> the error's name.
_MESSAGE_NAMES = {
    "readonly": "SQLITE_READONLY",
    "is full": "SQLITE_FULL",
    "unable to open": "SQLITE_CANTOPEN",
    "locked": "SQLITE_BUSY",
    "not a database": "SQLITE_NOTADB",
}


class RegistryError(InputError):
    """The registry database cannot be opened, read or written (exit 2)."""


class AlreadyPromoted(ChecksFailed):
    """This model revision is already in the registry (exit 1)."""


class PromotionConflict(ChecksFailed):
    """Another revision of the model was promoted while this one was being checked (exit 1)."""


def default_registry_path(workspace: Path) -> Path:
    """$ONBOARD_REGISTRY, else `<workspace>/onboarding/registry.sqlite3`."""
    env = os.environ.get(ENV_REGISTRY)
    return Path(env) if env else workspace / "onboarding" / "registry.sqlite3"


def _db_error(exc: sqlite3.Error, path: Path) -> RegistryError:
    text = str(exc)
    name = getattr(exc, "sqlite_errorname", "") or next((n for w, n in _MESSAGE_NAMES.items() if w in text), "")
    base = next((k for k in _DB_HINTS if name.startswith(k)), None)
    return RegistryError(f"registry {path}: {text}", _DB_HINTS.get(base or "", "check the path and rerun"))


class Registry:
    """Promotion records in one SQLite file. Methods open a short-lived connection each: safe across processes."""

    timeout_s = 30.0

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    @contextmanager
    def _connect(self, create: bool = True) -> Iterator[sqlite3.Connection]:
        if create:
            if self.path.parent.exists() and not self.path.parent.is_dir():
                raise RegistryError(
                    f"cannot create the registry {self.path}: {self.path.parent} is a file, not a folder",
                    "pass --registry with a path inside a folder (or set ONBOARD_REGISTRY)",
                )
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise os_error(exc, self.path.parent, "create the registry folder") from exc
        conn = None
        try:
            # isolation_level=None: we issue BEGIN/COMMIT ourselves so the transaction covers exactly one record.
            conn = sqlite3.connect(self.path, timeout=self.timeout_s, isolation_level=None)
            _switch_to_wal(conn, self.timeout_s)
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA foreign_keys=ON")
            conn.executescript(SCHEMA)
            yield conn
        except sqlite3.Error as exc:
            if conn is not None and conn.in_transaction:
                conn.rollback()
            raise _db_error(exc, self.path) from exc
        finally:
            if conn is not None:
                conn.close()

    def add(self, record: PromotionRecord, expect_latest: int | None) -> PromotionRecord:
        """Append `record` in one transaction, or raise AlreadyPromoted (same model and revision present) or
        PromotionConflict (the model's latest promotion is no longer `expect_latest`), leaving the registry as it was."""
        with self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")  # takes the write lock now: concurrent promoters queue here
            try:
                same = conn.execute(
                    "SELECT id, promoted_by, promoted_at FROM promotions WHERE model = ? AND revision = ?",
                    (record.model, record.revision),
                ).fetchone()
                if same:
                    raise _already(record.model, record.revision, *same)
                row = conn.execute("SELECT MAX(id) FROM promotions WHERE model = ?", (record.model,)).fetchone()
                if row[0] != expect_latest:
                    raise PromotionConflict(
                        f"{record.model} was promoted (record #{row[0]}) while {record.revision} was being checked",
                        "rerun the golden comparison against the newly promoted goldens, then promote again",
                    )
                data = record.to_dict()
                cur = conn.execute(
                    f"INSERT INTO promotions ({', '.join(_COLUMNS)}, record_json)"
                    f" VALUES ({', '.join(':' + c for c in _COLUMNS)}, :record_json)",
                    {**data, "record_json": json.dumps(data, ensure_ascii=False)},
                )
                record_id = int(cur.lastrowid or 0)
                conn.executemany(
                    "INSERT INTO promotion_files (promotion_id, path, sha256, size) VALUES (?, ?, ?, ?)",
                    [(record_id, f.path, f.sha256, f.size) for f in record.files],
                )
                conn.executemany(
                    "INSERT INTO promotion_checks (promotion_id, stage, name, passed, required, detail)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    [(record_id, c.stage, c.name, int(c.passed), int(c.required), c.detail) for c in record.checks],
                )
                conn.execute("COMMIT")
            except sqlite3.IntegrityError as exc:
                conn.rollback()
                raise _already(record.model, record.revision, None, "?", "?") from exc
            except BaseException:
                if conn.in_transaction:
                    conn.rollback()
                raise
        return replace(record, id=record_id)

    def _fetch(self, where: str, args: tuple[object, ...]) -> PromotionRecord | None:
        if not self.path.exists():
            return None
        with self._connect(create=False) as conn:
            row = conn.execute(f"SELECT id, record_json FROM promotions WHERE {where} ORDER BY id DESC LIMIT 1", args)
            found = row.fetchone()
        return replace(serde.from_dict(PromotionRecord, json.loads(found[1])), id=found[0]) if found else None

    def already_promoted(self, repo: str, revision: str) -> bool:
        """True when `repo` (org/name or slug) at `revision` (full sha) has a promotion record."""
        return self._fetch("(model = ? OR slug = ?) AND revision = ?", (repo, repo, revision)) is not None

    def latest(self, model: str) -> PromotionRecord | None:
        """The model's most recent promotion (its goldens are the ones a new revision must match)."""
        return self._fetch("model = ? OR slug = ?", (model, model))

    def by_attempt(self, attempt: str) -> PromotionRecord | None:
        return self._fetch("attempt = ?", (attempt,))

    def show(self, model: str, revision: str | None = None) -> PromotionRecord:
        """One record: the latest of `model`, or the one whose revision starts with `revision`."""
        if revision is None:
            record = self.latest(model)
        else:
            record = self._fetch("(model = ? OR slug = ?) AND revision LIKE ? || '%'", (model, model, revision))
        if record is None:
            what = f"{model} at {revision}" if revision else model
            raise InputError(f"no promotion of {what} in {self.path}", "list what is there: onboard registry list")
        return record

    def list(self, model: str | None = None) -> list[PromotionSummary]:
        """Every promotion, newest first (only `model`'s when given)."""
        if not self.path.exists():
            return []
        query = (
            "SELECT p.id, p.model, p.revision, p.promoted_by, p.promoted_at,"
            " COALESCE(SUM(c.passed), 0), COUNT(c.name) FROM promotions p"
            " LEFT JOIN promotion_checks c ON c.promotion_id = p.id"
            + (" WHERE p.model = ? OR p.slug = ?" if model else "")
            + " GROUP BY p.id ORDER BY p.id DESC"
        )
        with self._connect(create=False) as conn:
            rows = conn.execute(query, (model, model) if model else ()).fetchall()
        return [PromotionSummary(*row) for row in rows]


def _already(model: str, revision: str, record_id: int | None, by: str, at: str) -> AlreadyPromoted:
    which = f"record #{record_id}, by {by} at {at}" if record_id else "by a concurrent promotion"
    return AlreadyPromoted(
        f"{model} at {revision} is already promoted ({which})",
        f"see it with: onboard registry show {model} --revision {revision[:12]}",
    )


def already_promoted(repo: str, revision: str, registry_path: Path | str | None = None) -> bool:
    """For the watch service: has `repo` at `revision` been promoted? Never creates the registry."""
    return Registry(registry_path or default_registry_path(Path.cwd())).already_promoted(repo, revision)


def _switch_to_wal(conn: sqlite3.Connection, timeout_s: float) -> None:
    """PRAGMA journal_mode=WAL, retried until timeout_s: turning a new file into WAL takes a lock that SQLite's busy
    handler does not wait for, so two processes creating the registry at once would fail with "database is locked"."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.05)
