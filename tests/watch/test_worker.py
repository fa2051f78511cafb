"""Workers run the real run-command (a recording script) and forward to a loopback GitHub: retries, verdicts,
timeouts, concurrency, promotion dedupe."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from onboard.watch.queue import Queue
from onboard.watch.types import Backoff, JobKey
from onboard.watch.worker import CommandExecutor, GitHubDispatch, Worker
from tests.watch.helpers import read_calls, recorder_command, sha_for

FAST = Backoff(base_s=0.05, cap_s=0.1, jitter=0.0)


def _worker(queue: Queue, log: Path, **kw: object) -> Worker:
    timeout = kw.pop("timeout_s", 30.0)
    return Worker(queue, CommandExecutor(recorder_command(log), timeout_s=timeout), backoff=FAST, **kw)  # type: ignore[arg-type]


def test_transient_failure_is_retried_then_done(
    queue_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RECORD_EXITS", "3,0")
    log = tmp_path / "calls.jsonl"
    with Queue(queue_db) as q:
        q.enqueue(JobKey("org/m", sha_for("org/m")))
        ran = _worker(q, log).drain()
        job = q.jobs()[0]
    assert [(j.state, j.exit_code) for j in ran] == [("queued", 3), ("done", 0)]
    assert (job.state, job.attempts) == ("done", 2)
    calls = read_calls(log)
    assert len(calls) == 2 and calls[1]["t"] - calls[0]["t"] >= 0.05  # the backoff was waited out


def test_gives_up_after_max_attempts(queue_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECORD_EXITS", "3")
    with Queue(queue_db) as q:
        q.enqueue(JobKey("org/m", sha_for("org/m")))
        _worker(q, tmp_path / "calls.jsonl", max_attempts=2).drain()
        job = q.jobs()[0]
    assert (job.state, job.attempts, job.exit_code) == ("failed", 2, 3)
    assert "recorded call 2" in job.output_tail


def test_checks_failed_is_a_verdict_not_retried(
    queue_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RECORD_EXITS", "1")
    with Queue(queue_db) as q:
        q.enqueue(JobKey("org/m", sha_for("org/m")))
        _worker(q, tmp_path / "calls.jsonl").drain()
        job = q.jobs()[0]
    assert (job.state, job.attempts, job.exit_code) == ("failed", 1, 1)
    assert "verdict" in job.note


def test_timeout_kills_the_run(queue_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECORD_SLEEP", "30")
    with Queue(queue_db) as q:
        q.enqueue(JobKey("org/m", sha_for("org/m")))
        _worker(q, tmp_path / "calls.jsonl", max_attempts=1, timeout_s=0.5).drain()
        job = q.jobs()[0]
    assert (job.state, job.exit_code) == ("failed", None)
    assert "timed out" in job.note


def test_concurrent_workers_run_each_job_once(queue_db: Path, tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    with Queue(queue_db) as q:
        for i in range(12):
            q.enqueue(JobKey(f"org/m{i}", sha_for(f"org/m{i}")))

    def drain() -> None:
        with Queue(queue_db) as mine:
            _worker(mine, log).drain()

    threads = [threading.Thread(target=drain) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    repos = sorted(c["argv"][0] for c in read_calls(log))
    assert repos == sorted(f"org/m{i}" for i in range(12))
    with Queue(queue_db) as q:
        assert q.counts()["done"] == 12


def test_already_promoted_revision_is_not_run(queue_db: Path, tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    promoted = {("org/m", sha_for("org/m"))}
    with Queue(queue_db) as q:
        q.enqueue(JobKey("org/m", sha_for("org/m")))
        q.enqueue(JobKey("org/other", sha_for("org/other")))
        _worker(q, log, is_promoted=lambda repo, rev: (repo, rev) in promoted).drain()
        notes = {j.repo: (j.state, j.note) for j in q.jobs()}
    assert [c["argv"][0] for c in read_calls(log)] == ["org/other"]
    assert notes["org/m"] == ("done", "already promoted: not run again")


def test_registry_check_asks_the_promotion_registry(tmp_path: Path) -> None:
    from onboard.watch.types import registry_check

    path = tmp_path / "registry.sqlite3"
    check = registry_check(path)
    assert not check("org/m", "a" * 40)
    assert not path.exists()  # asking never creates the registry
    # A positive answer needs a full PromotionRecord (issue 6's tests cover the registry itself).


class _GitHub(BaseHTTPRequestHandler):
    answers: dict[str, list[int]]
    """client_payload.repo → statuses to answer in turn (then 204)."""
    seen: list[dict]

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append({"path": self.path, "auth": self.headers["Authorization"], "body": body})
        queue = self.answers.get(body["client_payload"]["repo"], [])
        status = queue.pop(0) if queue else 204
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.fixture
def github() -> object:
    class Handler(_GitHub):
        answers: dict[str, list[int]] = {}
        seen: list[dict] = []

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    Handler.url = f"http://127.0.0.1:{server.server_address[1]}"  # type: ignore[attr-defined]
    yield Handler
    server.shutdown()
    server.server_close()


def test_forward_as_repository_dispatch(queue_db: Path, github: type[_GitHub]) -> None:
    github.answers.update({"org/m": [502], "org/bad": [401]})
    executor = GitHubDispatch("acme/onboarding", "tok", api_url=github.url)  # type: ignore[attr-defined]
    sha = sha_for("org/m")
    with Queue(queue_db) as q:
        q.enqueue(JobKey("org/m", sha))
        q.enqueue(JobKey("org/bad", sha_for("org/bad")))
        Worker(q, executor, backoff=FAST).drain()
        jobs = {j.repo: j for j in q.jobs()}
    assert (jobs["org/m"].state, jobs["org/m"].attempts) == ("done", 2)  # 502 retried, then 204
    assert (jobs["org/bad"].state, jobs["org/bad"].exit_code, jobs["org/bad"].attempts) == ("failed", 401, 1)
    first = github.seen[0]
    assert first["path"] == "/repos/acme/onboarding/dispatches" and first["auth"] == "Bearer tok"
    assert first["body"]["event_type"] == "hf-model-upload"
    assert first["body"]["client_payload"]["repo"] == "org/m" and first["body"]["client_payload"]["revision"] == sha
