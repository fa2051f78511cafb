"""Real webhook POSTs on loopback: one job per (repo, revision), replays, a 1,000-event burst, auth and limits."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from onboard.watch.webhook import WebhookServer
from onboard.watch.worker import CommandExecutor, Worker
from tests.watch.helpers import hf_payload, post, read_calls, recorder_command, sha_for


def test_new_upload_runs_one_job(service: WebhookServer, tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    worker = Worker(service.queue, CommandExecutor(recorder_command(log), timeout_s=30))
    stop = threading.Event()
    thread = threading.Thread(target=worker.run_forever, args=(stop, service.wake, 0.2))
    thread.start()
    try:
        sha = sha_for("Qwen/Qwen9-1B")
        status, body = post(service.url + "/webhook", hf_payload("Qwen/Qwen9-1B", sha))
        assert status == 200 and body["status"] == "enqueued" and body["revision"] == sha
        for _ in range(300):  # the worker is woken by the enqueue; give it up to 30 s (a loaded CI machine)
            job = service.queue.job(body["job_id"])
            if job is not None and job.state == "done":
                break
            threading.Event().wait(0.1)
    finally:
        stop.set()
        service.wake.set()
        thread.join(10)
    assert job is not None and (job.state, job.exit_code, job.attempts) == ("done", 0, 1)
    assert "recorded call 1" in job.output_tail
    assert [c["argv"] for c in read_calls(log)] == [["Qwen/Qwen9-1B", sha]]
    assert read_calls(log)[0]["job"] == str(job.id)


def test_same_event_five_times_is_one_job(service: WebhookServer) -> None:
    payload = hf_payload("org/model", sha_for("org/model"))
    answers = [post(service.url + "/webhook", payload) for _ in range(5)]
    assert [s for s, _ in answers] == [200] * 5
    assert [b["status"] for _, b in answers] == ["enqueued"] + ["replay"] * 4
    assert len({b["job_id"] for _, b in answers}) == 1
    # Distinct deliveries (another webhook, a retry with new metadata) of the same revision: still one job.
    for delivery in range(1, 5):
        status, body = post(service.url + "/webhook", hf_payload("org/model", sha_for("org/model"), delivery=delivery))
        assert (status, body["status"]) == (200, "deduped")
    assert len(service.queue.jobs()) == 1
    assert service.queue.counts()["events"] == 5  # the first + 4 distinct deliveries; replays are not stored


def test_burst_of_1000_events_over_100_repos(service: WebhookServer) -> None:
    events = [hf_payload(f"org/m{i % 100}", sha_for(f"org/m{i % 100}"), delivery=i) for i in range(1000)]
    with ThreadPoolExecutor(max_workers=16) as pool:
        answers = list(pool.map(lambda e: post(service.url + "/webhook", e), events))
    assert [s for s, _ in answers] == [200] * 1000
    jobs = service.queue.jobs()
    assert len(jobs) == 100
    assert {(j.repo, j.revision) for j in jobs} == {(f"org/m{i}", sha_for(f"org/m{i}")) for i in range(100)}
    assert service.queue.counts()["events"] == 1000  # none lost
    assert sum(b["status"] == "enqueued" for _, b in answers) == 100


def test_wrong_or_missing_secret_is_401_and_stores_nothing(service: WebhookServer) -> None:
    payload = hf_payload("org/model", sha_for("org/model"))
    assert post(service.url + "/webhook", payload, secret="wrong")[0] == 401
    assert post(service.url + "/webhook", payload, secret=None)[0] == 401
    assert post(service.url + "/webhook", payload, secret="s3cret-for-tests-and-more")[0] == 401
    assert service.queue.counts() == {"queued": 0, "running": 0, "done": 0, "failed": 0, "events": 0}


def test_limits_and_bad_bodies(service: WebhookServer) -> None:
    url = service.url + "/webhook"
    big = json.dumps({"event": {"action": "update", "scope": "repo"}, "pad": "x" * (2 << 20)}).encode()
    assert post(url, big)[0] == 413
    status, body = post(url, b"{not json")
    assert status == 400 and "not JSON" in body["error"]
    assert post(url, {"hello": "world"})[0] == 400
    assert post(service.url + "/elsewhere", hf_payload("org/m", sha_for("org/m")))[0] == 404
    assert service.queue.counts()["events"] == 0


def test_ignored_events_are_stored_without_a_job(service: WebhookServer) -> None:
    status, body = post(service.url + "/webhook", hf_payload("org/data", sha_for("x"), repo_type="dataset"))
    assert (status, body["status"], body["job_id"]) == (200, "ignored", None)
    assert "not a model" in body["reason"]
    assert service.queue.counts()["events"] == 1 and service.queue.jobs() == []
