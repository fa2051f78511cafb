"""The durable queue: one job per (repo, revision), atomic claims across threads, leases, retries, durability."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from onboard.watch.queue import Queue
from onboard.watch.types import JobKey, QueueError, RunOutcome

KEY = JobKey("org/model", "a" * 40)
OK = RunOutcome(0, "fine", retryable=False)


def test_one_job_per_repo_revision_and_events_kept(queue_db: Path) -> None:
    with Queue(queue_db) as q:
        first = q.record_event(source="webhook", digest="d1", body="{}", key=KEY)
        second = q.record_event(source="webhook", digest="d2", body="{}", key=KEY)
        other = q.record_event(source="webhook", digest="d3", body="{}", key=JobKey("org/model", "b" * 40))
        assert (first.status, second.status, other.status) == ("enqueued", "deduped", "enqueued")
        assert first.job_id == second.job_id != other.job_id
        assert q.enqueue(KEY) == (first.job_id, False)
        assert q.counts() == {"queued": 2, "running": 0, "done": 0, "failed": 0, "events": 3}


def test_replay_window(queue_db: Path) -> None:
    with Queue(queue_db) as q:
        assert q.record_event(source="w", digest="d", body="{}", key=KEY, replay_window_s=60).status == "enqueued"
        replay = q.record_event(source="w", digest="d", body="{}", key=KEY, replay_window_s=60)
        assert replay.status == "replay" and q.counts()["events"] == 1
        # Outside the window (0 = no replay detection) the same body is a new event, still the same job.
        assert q.record_event(source="w", digest="d", body="{}", key=KEY, replay_window_s=0).status == "deduped"


def test_wal_mode_and_survives_reopen(queue_db: Path) -> None:
    with Queue(queue_db) as q:
        q.enqueue(KEY)
    mode = sqlite3.connect(queue_db).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"
    with Queue(queue_db) as q:
        assert [j.key for j in q.jobs()] == [KEY]


def test_concurrent_claims_take_each_job_once(queue_db: Path) -> None:
    with Queue(queue_db) as q:
        for i in range(60):
            q.enqueue(JobKey(f"org/m{i}", "c" * 40))
    claimed: list[int] = []
    lock = threading.Lock()

    def claim_all() -> None:
        with Queue(queue_db) as mine:  # one connection per thread, like separate worker processes
            while (job := mine.claim(f"w{threading.get_ident()}", lease_s=60)) is not None:
                with lock:
                    claimed.append(job.id)

    threads = [threading.Thread(target=claim_all) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(claimed) == list(range(1, 61))


def test_expired_lease_is_reclaimed_and_stale_worker_cannot_finish(queue_db: Path) -> None:
    with Queue(queue_db) as q:
        q.enqueue(KEY)
        stale = q.claim("dead-worker", lease_s=0.05)
        assert stale is not None and q.claim("other", lease_s=60) is None  # lease still held
        time.sleep(0.1)
        taken = q.claim("other", lease_s=60)
        assert taken is not None and taken.id == stale.id and taken.attempts == 2
        assert not q.finish(stale, "dead-worker", OK, state="done")  # not ours any more
        assert q.finish(taken, "other", OK, state="done")
        assert q.job(taken.id).state == "done"  # type: ignore[union-attr]


def test_retry_only_failed_jobs(queue_db: Path) -> None:
    with Queue(queue_db) as q:
        q.enqueue(KEY)
        job = q.claim("w", 60)
        assert job is not None
        q.finish(job, "w", RunOutcome(3, "boom", retryable=True), state="failed")
        assert q.retry() == [job.id]
        again = q.job(job.id)
        assert again is not None and (again.state, again.attempts) == ("queued", 0)
        with pytest.raises(QueueError, match="not failed"):
            q.retry([job.id])
        with pytest.raises(QueueError, match="no job with id 99"):
            q.retry([99])


def test_unusable_path_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(QueueError, match="cannot open the queue database") as err:
        Queue(blocker / "queue.sqlite")
    assert "--db" in (err.value.hint or "")
