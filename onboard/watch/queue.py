"""The durable queue: every received event and every (repo, revision) job, in one SQLite file.

SQLite: one file, transactional, safe across threads and processes on one host, nothing to deploy. WAL lets readers
run while the webhook service writes; `synchronous=FULL` makes a committed (so acknowledged) event survive a power cut.
Exactly-once: UNIQUE(repo, revision) makes any number of events for one revision one job, and a worker takes a job
with one atomic UPDATE … RETURNING. A job whose worker died is taken again when its lease runs out.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from onboard.watch.types import JOB_STATES, Job, JobKey, QueueError, Receipt, RunOutcome

SCHEMA_VERSION = 1
OUTPUT_TAIL_CHARS = 4000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    received_at REAL NOT NULL,
    source TEXT NOT NULL,
    digest TEXT NOT NULL,
    action TEXT, scope TEXT, repo TEXT, revision TEXT,
    outcome TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    job_id INTEGER REFERENCES jobs(id),
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_digest ON events(digest, received_at);
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    repo TEXT NOT NULL,
    revision TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed')),
    attempts INTEGER NOT NULL DEFAULT 0,
    source TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    next_attempt_at REAL NOT NULL,
    lease_until REAL,
    worker TEXT,
    exit_code INTEGER,
    output_tail TEXT NOT NULL DEFAULT '',
    note TEXT NOT NULL DEFAULT '',
    UNIQUE (repo, revision)
);
CREATE INDEX IF NOT EXISTS jobs_claim ON jobs(state, next_attempt_at);
CREATE TABLE IF NOT EXISTS watch_state (repo TEXT PRIMARY KEY, sha TEXT NOT NULL, seen_at REAL NOT NULL);
"""

_JOB_COLUMNS = (
    "id, repo, revision, state, attempts, source, created_at, updated_at, next_attempt_at, worker, exit_code, "
    "output_tail, note"
)


def default_db_path() -> Path:
    """`$ONBOARD_QUEUE_DB`, else `$XDG_STATE_HOME/onboard/queue.sqlite` (~/.local/state/onboard/queue.sqlite)."""
    if env := os.environ.get("ONBOARD_QUEUE_DB"):
        return Path(env)
    state = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return state / "onboard" / "queue.sqlite"


def _job(row: tuple) -> Job:
    return Job(*row[:11], output_tail=row[11] or "", note=row[12] or "")


class Queue:
    """One connection to the queue file, safe to share between threads (a lock serialises its use)."""

    def __init__(self, path: str | Path, *, busy_timeout_s: float = 30.0) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(
                str(self.path), timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._lock = threading.RLock()
            # executescript() manages its own transaction; every statement is idempotent (IF NOT EXISTS).
            self._db.executescript(_SCHEMA)
            self._db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        except (sqlite3.Error, OSError) as exc:
            raise QueueError(
                f"cannot open the queue database {self.path}: {exc}",
                "check the path and its permissions, or pass --db / set ONBOARD_QUEUE_DB to another file",
            ) from exc

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> Queue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        # BEGIN IMMEDIATE takes the write lock up front: no deadlock from two readers upgrading at once.
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
            if self._db.in_transaction:
                self._db.execute("COMMIT")

    def _upsert_job(self, db: sqlite3.Connection, key: JobKey, source: str, now: float) -> tuple[int, bool]:
        row = db.execute(
            "INSERT INTO jobs (repo, revision, state, source, created_at, updated_at, next_attempt_at)"
            " VALUES (?, ?, 'queued', ?, ?, ?, ?) ON CONFLICT (repo, revision) DO NOTHING RETURNING id",
            (key.repo, key.revision, source, now, now, now),
        ).fetchone()
        if row is not None:
            return int(row[0]), True
        existing = db.execute("SELECT id FROM jobs WHERE repo = ? AND revision = ?", (key.repo, key.revision))
        return int(existing.fetchone()[0]), False

    def record_event(
        self,
        *,
        source: str,
        digest: str,
        body: str,
        key: JobKey | None,
        action: str | None = None,
        scope: str | None = None,
        reason: str = "",
        replay_window_s: float = 0.0,
        skip: bool = False,
    ) -> Receipt:
        """Store one event and, when it names a (repo, revision) and `skip` is false, its job: one transaction,
        committed before this returns. An event whose digest was stored less than `replay_window_s` ago is a replay:
        nothing is stored."""
        now = time.time()
        with self._tx() as db:
            if replay_window_s > 0:
                seen = db.execute(
                    "SELECT id, job_id FROM events WHERE digest = ? AND received_at >= ? LIMIT 1",
                    (digest, now - replay_window_s),
                ).fetchone()
                if seen is not None:
                    return Receipt("replay", int(seen[0]), seen[1], key, "same payload already received")
            job_id, status = None, "ignored"
            repo, revision = (key.repo, key.revision) if key is not None else (None, None)
            if key is not None and not skip:
                job_id, new = self._upsert_job(db, key, source, now)
                status = "enqueued" if new else "deduped"
            cur = db.execute(
                "INSERT INTO events (received_at, source, digest, action, scope, repo, revision, outcome, reason,"
                " job_id, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (now, source, digest, action, scope, repo, revision, status, reason, job_id, body),
            )
            return Receipt(status, cur.lastrowid, job_id, key, reason)

    def enqueue(self, key: JobKey, source: str = "manual") -> tuple[int, bool]:
        """Add a job for `key` unless one exists; returns (job id, whether it is new)."""
        with self._tx() as db:
            return self._upsert_job(db, key, source, time.time())

    def claim(self, worker: str, lease_s: float) -> Job | None:
        """Atomically take the next runnable job (queued and due, or running with an expired lease)."""
        now = time.time()
        with self._tx() as db:
            row = db.execute(
                "UPDATE jobs SET state = 'running', attempts = attempts + 1, worker = ?, lease_until = ?,"
                " updated_at = ? WHERE id = (SELECT id FROM jobs WHERE (state = 'queued' AND next_attempt_at <= ?)"
                " OR (state = 'running' AND lease_until < ?) ORDER BY next_attempt_at, id LIMIT 1)"
                f" RETURNING {_JOB_COLUMNS}",
                (worker, now + lease_s, now, now, now),
            ).fetchone()
        return _job(row) if row else None

    def finish(self, job: Job, worker: str, outcome: RunOutcome, *, state: str, retry_at: float | None = None) -> bool:
        """Record a run's result. False when the job is no longer ours (lease expired and taken by another worker)."""
        assert state in JOB_STATES and state != "running"
        now, tail = time.time(), outcome.output_tail[-OUTPUT_TAIL_CHARS:]
        retry_at = now if retry_at is None else retry_at
        with self._tx() as db:
            cur = db.execute(
                "UPDATE jobs SET state = ?, exit_code = ?, output_tail = ?, note = ?, updated_at = ?,"
                " next_attempt_at = ?, lease_until = NULL WHERE id = ? AND worker = ? AND state = 'running'",
                (state, outcome.exit_code, tail, outcome.note, now, retry_at, job.id, worker),
            )
            return cur.rowcount == 1

    def retry(self, job_ids: list[int] | None = None) -> list[int]:
        """Put failed jobs back in the queue with a fresh attempt budget: the given ids, or every failed job."""
        now = time.time()
        with self._tx() as db:
            for job_id in job_ids or []:
                row = db.execute("SELECT state FROM jobs WHERE id = ?", (job_id,)).fetchone()
                if row is None:
                    raise QueueError(f"no job with id {job_id} in {self.path}", "see `onboard queue list`")
                if row[0] != "failed":
                    raise QueueError(
                        f"job {job_id} is {row[0]}, not failed: only failed jobs are retried",
                        "a queued or running job will run anyway; a done job ran successfully",
                    )
            if job_ids is None:
                job_ids = [r[0] for r in db.execute("SELECT id FROM jobs WHERE state = 'failed' ORDER BY id")]
            db.executemany(
                "UPDATE jobs SET state = 'queued', attempts = 0, next_attempt_at = ?, updated_at = ?,"
                " note = 'retry requested' WHERE id = ?",
                [(now, now, job_id) for job_id in job_ids],
            )
        return list(job_ids)

    def jobs(self, state: str | None = None, limit: int | None = None) -> list[Job]:
        sql = f"SELECT {_JOB_COLUMNS} FROM jobs WHERE ?1 IS NULL OR state = ?1 ORDER BY id LIMIT ?2"
        with self._lock:  # LIMIT -1: no limit
            return [_job(r) for r in self._db.execute(sql, (state, -1 if limit is None else limit))]

    def job(self, job_id: int) -> Job | None:
        with self._lock:
            row = self._db.execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return _job(row) if row else None

    def counts(self) -> dict[str, int]:
        """Jobs per state (every state present, zero included) plus `events`."""
        with self._lock:
            out = dict.fromkeys(JOB_STATES, 0)
            out.update(dict(self._db.execute("SELECT state, count(*) FROM jobs GROUP BY state").fetchall()))
            out["events"] = self._db.execute("SELECT count(*) FROM events").fetchone()[0]
        return out

    def next_due(self) -> float | None:
        """When the earliest queued job becomes runnable (None: nothing queued)."""
        with self._lock:
            row = self._db.execute("SELECT min(next_attempt_at) FROM jobs WHERE state = 'queued'").fetchone()
        return row[0]

    def seen_sha(self, repo: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT sha FROM watch_state WHERE repo = ?", (repo,)).fetchone()
        return row[0] if row else None

    def set_seen(self, repo: str, sha: str) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT INTO watch_state VALUES (?, ?, ?) ON CONFLICT (repo) DO UPDATE SET sha = ?, seen_at = ?",
                (repo, sha, time.time(), sha, time.time()),
            )
