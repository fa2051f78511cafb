"""The service killed with SIGKILL mid-burst and restarted on the same database loses nothing it acknowledged."""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from onboard.watch.queue import Queue
from tests.watch.helpers import SECRET, event_digests, hf_payload, post, read_calls, recorder_command, sha_for


def start_service(
    db: Path, log: Path, *extra: str, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    env = dict(os.environ, WEBHOOK_SECRET=SECRET, ONBOARD_DEBUG="1", **(env or {}))
    start = log.stat().st_size if log.exists() else 0  # a restart appends to the same log
    with open(log, "ab") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "onboard", "webhook", "serve", "--port", "0", "--secret-env", "WEBHOOK_SECRET",
             "--db", str(db), *(extra or ("--workers", "0"))],
            stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=db.parent,  # cwd: no stray promotion registry
        )  # fmt: skip
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if m := re.search(r"listening on (http://\S+)", log.read_text()[start:]):
            return proc, m.group(1)
        assert proc.poll() is None, log.read_text()
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"service did not start: {log.read_text()}")


def test_sigkill_mid_burst_loses_nothing_acknowledged(tmp_path: Path) -> None:
    db, log = tmp_path / "queue.sqlite", tmp_path / "service.log"
    bodies = [json.dumps(hf_payload(f"org/m{i % 100}", sha_for(f"org/m{i % 100}"), delivery=i)).encode()
              for i in range(1000)]  # fmt: skip
    proc, url = start_service(db, log)
    acked: set[int] = set()
    lock = threading.Lock()

    def send(i: int) -> None:
        try:
            status, _ = post(url, bodies[i], timeout=5)
        # Refused or reset once the service is dead, or its answer cut off after the status line (IncompleteRead, an
        # HTTPException, not an OSError): not acknowledged, the sender retries.
        except (OSError, http.client.HTTPException):
            return
        if status == 200:
            with lock:
                acked.add(i)
                if len(acked) == 300:
                    proc.send_signal(signal.SIGKILL)

    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(send, range(1000)))
    proc.wait(10)
    assert proc.returncode == -signal.SIGKILL
    assert 300 <= len(acked) < 1000, "the kill must land mid-burst"

    # Every acknowledged event is on disk, with its job, before anything restarts.
    with Queue(db) as queue:
        stored = event_digests(queue.path)
        keys = {(j.repo, j.revision) for j in queue.jobs()}
    assert {hashlib.sha256(bodies[i]).hexdigest() for i in acked} <= stored
    assert {(f"org/m{i % 100}", sha_for(f"org/m{i % 100}")) for i in acked} <= keys

    # Restart on the same database; the sender retries what was not acknowledged.
    proc, url = start_service(db, log)
    try:
        missing = [i for i in range(1000) if i not in acked]
        with ThreadPoolExecutor(max_workers=16) as pool:
            statuses = list(pool.map(lambda i: post(url, bodies[i])[0], missing))
        assert statuses == [200] * len(missing)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
    assert proc.returncode == 0, log.read_text()[-2000:]
    with Queue(db) as queue:
        assert event_digests(queue.path) == {hashlib.sha256(b).hexdigest() for b in bodies}
        assert len(queue.jobs()) == 100
        assert queue.counts()["events"] == 1000  # an event stored but not acknowledged is a replay, not a duplicate


def test_sigterm_stops_a_run_in_progress_and_requeues_it(tmp_path: Path) -> None:
    db, log, calls = tmp_path / "queue.sqlite", tmp_path / "service.log", tmp_path / "calls.jsonl"
    env = {"RECORD_SLEEP": "60", "ONBOARD_RUN_COMMAND": recorder_command(calls)}
    proc, url = start_service(db, log, "--workers", "1", env=env)
    try:
        assert post(url, hf_payload("org/slow", sha_for("org/slow")))[1]["status"] == "enqueued"
        deadline = time.monotonic() + 20
        while not read_calls(calls) and time.monotonic() < deadline:  # the run has started
            time.sleep(0.05)
        assert read_calls(calls)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
    assert proc.returncode == 0, log.read_text()[-2000:]
    assert "stopped 1 run(s) in progress" in log.read_text()
    with Queue(db) as queue:
        (job,) = queue.jobs()
    assert (job.state, job.attempts) == ("queued", 1) and "retry 2/3 scheduled" in job.note
