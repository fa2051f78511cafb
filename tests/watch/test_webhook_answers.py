"""What the webhook answers, field by field: health, the stored-event receipt, a store that fails, promoted revisions.

Added for the mutation score of the webhook (issue 16): the loopback tests in test_webhook.py check the job flow;
these pin the answers a sender or a monitor reads (status codes, bodies, Retry-After) and the refused empty secret.
Each request is one raw HTTP exchange handed to the server in process (`exchange`, test_webhook_requests.py): the
bytes a client reads, without a listening thread.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from onboard.errors import OnboardError
from onboard.watch.queue import Queue
from onboard.watch.webhook import WebhookConfig, WebhookServer
from tests.watch.helpers import sha_for
from tests.watch.test_webhook_requests import exchange, get, make_server, payload, ram_queue_db, request

queue_db = pytest.fixture(name="queue_db")(ram_queue_db)


@pytest.fixture
def queue(queue_db: Path) -> Iterator[Queue]:
    with Queue(queue_db) as q:
        yield q


@pytest.fixture
def server(queue: Queue) -> Iterator[WebhookServer]:
    srv = make_server(queue)
    yield srv
    srv._httpd.server_close()


def test_healthz_reports_the_job_counts_and_other_paths_are_404(server: WebhookServer) -> None:
    exchange(server, request(payload()))
    answer = exchange(server, get("/healthz"))
    assert (answer.status, answer.body) == (200, {"ok": True, "jobs": {"queued": 1, "running": 0, "done": 0,
                                                                       "failed": 0, "events": 1}})  # fmt: skip
    assert answer.headers["Content-Type"] == "application/json"
    for path in ("/webhook", "/healthz/x", "/HEALTHZ"):
        answer = exchange(server, get(path))
        assert (answer.status, answer.body) == (404, {"error": "not found"}), path


def test_the_receipt_names_the_event_job_and_revision(server: WebhookServer) -> None:
    sha = sha_for("org/model")
    answer = exchange(server, request(payload(), path="/"))  # "/" is a webhook path too
    job = server.queue.jobs()[0]
    assert answer.status == 200
    assert answer.body == {"status": "enqueued", "event_id": 1, "job_id": job.id, "repo": "org/model",
                           "revision": sha, "reason": ""}  # fmt: skip
    assert server.wake.is_set()  # a waiting worker is woken by the enqueue
    # A second delivery of the same revision: its own event, the same job, nobody woken again.
    server.wake.clear()
    again = exchange(server, request(payload(delivery=1)))
    assert again.body == {"status": "deduped", "event_id": 2, "job_id": job.id, "repo": "org/model",
                          "revision": sha, "reason": ""}  # fmt: skip
    assert not server.wake.is_set()


def test_an_event_the_store_refuses_is_503_with_retry_after_and_not_acknowledged(
    server: WebhookServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full_disk(**_: object) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(server.queue, "record_event", full_disk)
    answer = exchange(server, request(payload()))
    assert answer.status == 503
    assert answer.headers["Retry-After"] == "5"
    assert answer.body == {"error": "event not stored; retry later"}
    assert not server.wake.is_set()

    def queue_error(**_: object) -> None:
        raise OnboardError("the queue database is read-only", "check its permissions")

    monkeypatch.setattr(server.queue, "record_event", queue_error)
    assert exchange(server, request(payload())).status == 503


def test_a_promoted_revision_is_stored_without_a_job_and_an_unreadable_registry_enqueues(queue: Queue) -> None:
    sha = sha_for("org/done")

    def promoted(repo: str, revision: str) -> bool:
        return (repo, revision) == ("org/done", sha)

    srv = make_server(queue, is_promoted=promoted)
    try:
        answer = exchange(srv, request(payload("org/done")))
        assert (answer.status, answer.body["status"], answer.body["job_id"], answer.body["reason"]) == (
            200, "ignored", None, "already promoted")  # fmt: skip
        assert queue.jobs() == [] and queue.counts()["events"] == 1
        assert not srv.wake.is_set()
    finally:
        srv._httpd.server_close()

    def unreadable(repo: str, revision: str) -> bool:
        raise OnboardError("registry unreadable", "fix it")

    srv = make_server(queue, is_promoted=unreadable)
    try:
        answer = exchange(srv, request(payload("org/other")))
        assert (answer.status, answer.body["status"]) == (200, "enqueued")
    finally:
        srv._httpd.server_close()


def test_an_empty_secret_is_refused(queue_db: Path) -> None:
    with Queue(queue_db) as queue, pytest.raises(ValueError, match="^an empty webhook secret would accept anyone$"):
        WebhookServer(queue, WebhookConfig(b""), port=0)
