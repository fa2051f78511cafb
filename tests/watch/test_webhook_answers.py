"""What the webhook answers, field by field: health, the stored-event receipt, a store that fails, promoted revisions.

Added for the mutation score of the webhook (issue 16): the loopback tests in test_webhook.py check the job flow;
these pin the answers a sender or a monitor reads (status codes, bodies, Retry-After) and the refused empty secret.
"""

from __future__ import annotations

import http.client
import json
import sqlite3
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from onboard.errors import OnboardError
from onboard.watch.queue import Queue
from onboard.watch.webhook import WebhookConfig, WebhookServer
from tests.watch.helpers import SECRET, hf_payload, post, sha_for


def get(url: str) -> tuple[int, dict]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        conn.request("GET", parts.path)
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def test_healthz_reports_the_job_counts_and_other_paths_are_404(service: WebhookServer) -> None:
    post(service.url + "/webhook", hf_payload("org/model", sha_for("org/model")))
    status, body = get(service.url + "/healthz")
    assert (status, body) == (200, {"ok": True, "jobs": {"queued": 1, "running": 0, "done": 0, "failed": 0,
                                                         "events": 1}})  # fmt: skip
    assert get(service.url + "/webhook") == (404, {"error": "not found"})


def test_the_receipt_names_the_event_job_and_revision(service: WebhookServer) -> None:
    sha = sha_for("org/model")
    status, body = post(service.url + "/", hf_payload("org/model", sha))  # "/" is a webhook path too
    job = service.queue.jobs()[0]
    assert status == 200
    assert body == {"status": "enqueued", "event_id": body["event_id"], "job_id": job.id, "repo": "org/model",
                    "revision": sha, "reason": body["reason"]}  # fmt: skip
    assert isinstance(body["event_id"], int) and body["event_id"] >= 1
    assert service.wake.is_set()  # a waiting worker is woken by the enqueue


def test_an_event_the_store_refuses_is_503_with_retry_after_and_not_acknowledged(
    service: WebhookServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full_disk(**_: object) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(service.queue, "record_event", full_disk)
    parts = urlsplit(service.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    payload = json.dumps(hf_payload("org/model", sha_for("org/model"))).encode()
    conn.request("POST", "/webhook", body=payload, headers={"X-Webhook-Secret": SECRET})
    response = conn.getresponse()
    assert response.status == 503
    assert response.getheader("Retry-After") == "5"
    assert json.loads(response.read()) == {"error": "event not stored; retry later"}
    conn.close()
    assert not service.wake.is_set()


def test_a_promoted_revision_is_stored_without_a_job_and_an_unreadable_registry_enqueues(queue_db: Path) -> None:
    sha = sha_for("org/done")

    def promoted(repo: str, revision: str) -> bool:
        return (repo, revision) == ("org/done", sha)

    with Queue(queue_db) as queue, WebhookServer(queue, WebhookConfig(SECRET.encode(), is_promoted=promoted),
                                                 port=0) as server:  # fmt: skip
        status, body = post(server.url + "/webhook", hf_payload("org/done", sha))
        assert (status, body["job_id"], body["reason"]) == (200, None, "already promoted")
        assert queue.jobs() == [] and queue.counts()["events"] == 1

    def unreadable(repo: str, revision: str) -> bool:
        raise OnboardError("registry unreadable", "fix it")

    with Queue(queue_db) as queue, WebhookServer(queue, WebhookConfig(SECRET.encode(), is_promoted=unreadable),
                                                 port=0) as server:  # fmt: skip
        status, body = post(server.url + "/webhook", hf_payload("org/other", sha_for("org/other")))
        assert (status, body["status"]) == (200, "enqueued")


def test_an_empty_secret_is_refused(queue_db: Path) -> None:
    with Queue(queue_db) as queue, pytest.raises(ValueError, match="empty webhook secret"):
        WebhookServer(queue, WebhookConfig(b""), port=0)
