"""The webhook's request handling, one raw HTTP exchange at a time, in process.

Each request is written as bytes on one end of a socket pair and handed to the server's own per-connection step
(`finish_request`, what its accept loop runs in a thread), so a test reads exactly what a client would: the status
line, the headers, the JSON body, whether anything follows the answer, and how long the server took to answer and
close. No listening thread, no poll interval: milliseconds a test (the mutation score of issue 16 runs these per
mutant). The loopback flow (a worker run, a 1,000-event burst) stays in test_webhook.py.

Pinned at their edges: the secret (exact bytes, constant-time compare, checked before any length rule), the body
limit (max_body_bytes accepted, one more refused), what a rejected client can make the server read, Content-Length
and Transfer-Encoding, and the replay window (inclusive at its end).
"""

from __future__ import annotations

import hashlib
import http.client
import io
import json
import logging
import select
import socket
import sqlite3
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

from onboard.watch import queue as queue_module
from onboard.watch.queue import Queue
from onboard.watch.webhook import WebhookConfig, WebhookServer
from tests.watch.helpers import SECRET, event_digests, hf_payload, sha_for

CLIENT = ("127.0.0.1", 50123)
LIMIT = 4096  # max_body_bytes of the test servers: real payloads are ~1 KB
READ_TIMEOUT_S = 3.0
RESET = b"<connection reset>"


@dataclass
class Answer:
    status: int
    headers: http.client.HTTPMessage
    body: dict
    after: bytes
    """What the server sent after its answer before closing (nothing, unless it read on past the request)."""
    seconds: float
    """From handing over the connection to the server closing it."""


class _Held(io.BytesIO):
    def close(self) -> None:  # http.client closes its file after the body; keep it readable for `after`
        pass


class _Raw:
    def __init__(self, data: bytes) -> None:
        self.file = _Held(data)

    def makefile(self, mode: str) -> io.BytesIO:
        return self.file


def parse(raw: bytes, seconds: float = 0.0) -> Answer:
    source = _Raw(raw)
    response = http.client.HTTPResponse(source)  # type: ignore[arg-type]
    response.begin()
    data = response.read()
    return Answer(response.status, response.msg, json.loads(data) if data else {}, source.file.read(), seconds)


def _read_all(sock: socket.socket) -> bytes:
    sock.settimeout(10)
    chunks = []
    try:
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    except ConnectionResetError:  # the server closed with input unread (past what it agrees to read)
        chunks.append(RESET)
    return b"".join(chunks)


def exchange(server: WebhookServer, request: bytes, *, half_close: bool = True) -> Answer:
    """Send `request` (then end the sending side unless `half_close` is False, as a client waiting for the answer
    with its connection open does) and return the server's answer."""
    client, conn = socket.socketpair()

    def send() -> None:
        try:
            client.sendall(request)
            if half_close:
                client.shutdown(socket.SHUT_WR)
        except OSError:  # the server closed before reading all of it
            pass

    writer = threading.Thread(target=send, daemon=True)
    writer.start()
    start = time.monotonic()
    try:
        server._httpd.finish_request(conn, CLIENT)
    finally:
        server._httpd.shutdown_request(conn)
    seconds = time.monotonic() - start
    with client:
        raw = _read_all(client)
    writer.join(10)
    return parse(raw, seconds)


def staged(server: WebhookServer, first: bytes, rest: bytes, pause_s: float = 0.15) -> tuple[bytes, Answer]:
    """Send `first`, keep the connection open for `pause_s` and collect whatever the server says meanwhile, then
    send `rest`; returns (what came during the pause, the answer)."""
    client, conn = socket.socketpair()

    def serve() -> None:
        try:
            server._httpd.finish_request(conn, CLIENT)
        finally:
            server._httpd.shutdown_request(conn)

    handler = threading.Thread(target=serve, daemon=True)
    handler.start()
    with client:
        client.sendall(first)
        early = b""
        if select.select([client], [], [], pause_s)[0]:
            early = client.recv(65536)
        start = time.monotonic()
        try:
            client.sendall(rest)
        except OSError:
            pass
        raw = early + _read_all(client)
        seconds = time.monotonic() - start
    handler.join(READ_TIMEOUT_S + 5)
    return early, parse(raw, seconds)


def request(body: bytes | dict | None, *, path: str = "/webhook", secret: bytes | str | None = SECRET,
            length: int | str | None = -1, extra: dict[str, str] | None = None) -> bytes:  # fmt: skip
    """A raw POST: `length` -1 is the body's own length, None sends no Content-Length."""
    data = b"" if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
    lines = [f"POST {path} HTTP/1.1".encode(), b"Host: webhook.test", b"Content-Type: application/json"]
    if secret is not None:
        lines.append(b"X-Webhook-Secret: " + (secret.encode() if isinstance(secret, str) else secret))
    if length is not None:
        lines.append(f"Content-Length: {len(data) if length == -1 else length}".encode())
    lines += [f"{k}: {v}".encode() for k, v in (extra or {}).items()]
    return b"\r\n".join(lines) + b"\r\n\r\n" + data


def get(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: webhook.test\r\n\r\n".encode()


def ram_queue_db() -> Iterator[Path]:
    """The queue file on a RAM disk where there is one: these tests check answers, not durability, and creating an
    fsync'd SQLite file costs ~30 ms on a busy disk (the mutation score runs these tests once a mutant)."""
    ram = Path("/dev/shm")
    with tempfile.TemporaryDirectory(dir=ram if ram.is_dir() else None) as tmp:
        yield Path(tmp) / "queue.sqlite"


queue_db = pytest.fixture(name="queue_db")(ram_queue_db)


@pytest.fixture
def queue(queue_db: Path) -> Iterator[Queue]:
    with Queue(queue_db) as q:
        yield q


def make_server(queue: Queue, secret: bytes = SECRET.encode(), **config: object) -> WebhookServer:
    """A webhook server that is never started: its requests are handed over by `exchange` / `staged`."""
    config.setdefault("max_body_bytes", LIMIT)
    config.setdefault("read_timeout_s", READ_TIMEOUT_S)
    return WebhookServer(queue, WebhookConfig(secret, **config), port=0)  # type: ignore[arg-type]


@pytest.fixture
def server(queue: Queue) -> Iterator[WebhookServer]:
    srv = make_server(queue)
    yield srv
    srv._httpd.server_close()


def payload(repo: str = "org/model", **kw: object) -> dict:
    return hf_payload(repo, sha_for(repo), **kw)  # type: ignore[arg-type]


def stored_events(db: Path) -> list[dict]:
    conn = sqlite3.connect(db)
    try:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute("SELECT * FROM events ORDER BY id")]
    finally:
        conn.close()


NOTHING = {"queued": 0, "running": 0, "done": 0, "failed": 0, "events": 0}


# -- authentication -------------------------------------------------------------------------------------------------


def test_only_the_exact_secret_bytes_are_accepted(server: WebhookServer, queue: Queue) -> None:
    refused = [None, "", "wrong", SECRET[:-1], SECRET + "x", SECRET.upper(), SECRET[1:]]
    for secret in refused:
        answer = exchange(server, request(payload(), secret=secret))
        assert (answer.status, answer.body) == (401, {"error": "wrong or missing X-Webhook-Secret"}), secret
    assert queue.counts() == NOTHING
    # Header names are case-insensitive in HTTP: a lower-case header carries the secret as well.
    raw = request(payload(), secret=None, extra={"x-webhook-secret": SECRET})
    assert exchange(server, raw).status == 200


def test_a_latin1_secret_compares_its_bytes(queue: Queue) -> None:
    # `onboard webhook serve` encodes the secret as latin-1; a header carries bytes, decoded as latin-1 by HTTP.
    srv = make_server(queue, "sécret-ü".encode("latin-1"))
    try:
        assert exchange(srv, request(payload(), secret="sécret-ü".encode("latin-1"))).status == 200
        assert exchange(srv, request(payload("org/b"), secret="sécret-ü".encode())).status == 401  # its UTF-8 bytes
        assert exchange(srv, request(payload("org/c"), secret=b"s?cret-?")).status == 401
    finally:
        srv._httpd.server_close()
    assert [j.repo for j in queue.jobs()] == ["org/model"]


def test_the_secret_is_checked_before_any_length_rule(server: WebhookServer, queue: Queue) -> None:
    # An unauthenticated client learns nothing about the limits: no Content-Length, chunked or oversized is 401.
    assert exchange(server, request(payload(), secret="wrong", length=None)).status == 401
    chunked = request(b"5\r\nhello\r\n0\r\n\r\n", secret="wrong", length=None, extra={"Transfer-Encoding": "chunked"})
    assert exchange(server, chunked).status == 401
    assert exchange(server, request(b"x" * (LIMIT + 1), secret=None)).status == 401
    assert queue.counts() == NOTHING


def test_a_rejection_is_logged_with_the_client_and_the_header(
    server: WebhookServer, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="onboard.watch.webhook"):
        exchange(server, request(payload(), secret="wrong"))
    messages = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "onboard.watch.webhook"]
    assert ("WARNING", "rejected a webhook from 127.0.0.1: wrong or missing X-Webhook-Secret") in messages
    # The access line (debug): client, request line, status.
    assert ("DEBUG", '127.0.0.1 "POST /webhook HTTP/1.1" 401 -') in messages


# -- what a rejected or oversized client can make the server read ---------------------------------------------------


def test_a_rejected_body_is_read_to_its_end_before_the_answer(server: WebhookServer) -> None:
    # Closing with unread input resets a TCP connection, and the client may then never read the answer: so the
    # server reads a rejected body (up to max_body_bytes) first, and answers as soon as it has it all.
    size = LIMIT
    for path, secret, status in (("/webhook", "wrong", 401), ("/elsewhere", SECRET, 404)):
        head = request(b"x" * size, path=path, secret=secret)
        early, answer = staged(server, head[:-1], head[-1:])
        assert early == b"", path  # nothing while the last byte is missing
        assert answer.status == status and answer.seconds < 1.5 and answer.after == b""


def test_a_rejected_client_cannot_make_the_server_read_past_max_body_bytes(server: WebhookServer) -> None:
    # Content-Length claims 100x the limit; the server reads max_body_bytes, answers and closes (no wait for the
    # rest, which never comes).
    for path, secret, status in (("/webhook", "wrong", 401), ("/elsewhere", SECRET, 404)):
        head = request(b"", path=path, secret=secret, length=LIMIT * 100)
        early, answer = staged(server, head + b"x" * LIMIT, b"")
        assert early.startswith(f"HTTP/1.0 {status} ".encode()), path
        assert answer.status == status
        # The same claim with more of the body sent: the server answers, then closes with the rest unread (the
        # client may see a reset after the answer), and reads none of it as another request.
        answer = exchange(server, head + b"x" * (LIMIT * 3))
        assert answer.status == status and answer.after in (b"", RESET), path


def test_a_rejection_without_a_body_is_answered_at_once(server: WebhookServer) -> None:
    # A client that sent no Content-Length and waits with its connection open must not wait for the read timeout.
    for raw, status in ((request(None, secret="wrong", length=None), 401),
                        (request(None, path="/nope", length=None), 404)):  # fmt: skip
        answer = exchange(server, raw, half_close=False)
        assert answer.status == status and answer.seconds < READ_TIMEOUT_S / 2


def test_a_body_over_the_limit_is_413_after_it_is_read(server: WebhookServer, queue: Queue) -> None:
    # Read to its last byte (here 64 KiB + 1: more than one read), then answered at once.
    size = (64 << 10) + 1
    early, answer = staged(server, request(b"x" * size)[:-1], b"x")
    assert early == b""
    assert (answer.status, answer.body) == (413, {"error": f"body of {size} bytes exceeds the limit of {LIMIT}"})
    assert answer.seconds < 1.5
    body = b"x" * (LIMIT + 1)
    # A client that keeps its connection open after the 413 sees it closed at once, not after the read timeout.
    answer = exchange(server, request(body), half_close=False)
    assert answer.status == 413 and answer.seconds < READ_TIMEOUT_S / 2 and answer.after == b""
    assert queue.counts() == NOTHING


def test_a_body_of_exactly_max_body_bytes_is_accepted(server: WebhookServer, queue: Queue) -> None:
    data = json.dumps(payload()).encode()
    padded = data + b" " * (LIMIT - len(data))  # JSON allows trailing whitespace
    assert len(padded) == LIMIT
    answer = exchange(server, request(padded))
    assert (answer.status, answer.body["status"]) == (200, "enqueued")
    assert exchange(server, request(padded + b" ")).status == 413
    assert queue.counts()["events"] == 1


# -- Content-Length ------------------------------------------------------------------------------------------------


def test_a_missing_or_unreadable_content_length_is_411(server: WebhookServer, queue: Queue) -> None:
    for length in (None, "abc", "-5", "12abc", ""):
        answer = exchange(server, request(payload(), length=length))
        assert (answer.status, answer.body) == (411, {"error": "a Content-Length is required"}), length
    assert queue.counts() == NOTHING


def test_a_chunked_body_is_411_and_its_chunks_are_not_read_as_a_request(server: WebhookServer) -> None:
    data = json.dumps(payload()).encode()
    chunks = f"{len(data):x}\r\n".encode() + data + b"\r\n0\r\n\r\n"
    answer = exchange(server, request(chunks, length=None, extra={"Transfer-Encoding": "chunked"}))
    assert (answer.status, answer.after) == (411, b"")
    # Both headers (a request-smuggling shape): refused too, whatever Content-Length says.
    answer = exchange(server, request(chunks, extra={"Transfer-Encoding": "chunked"}))
    assert (answer.status, answer.after) == (411, b"")
    assert server.queue.counts() == NOTHING


def test_a_body_shorter_than_its_content_length_is_400(server: WebhookServer) -> None:
    data = json.dumps(payload()).encode()
    answer = exchange(server, request(data, length=len(data) + 10))
    assert (answer.status, answer.body) == (400, {"error": "body shorter than its Content-Length"})
    assert server.queue.counts() == NOTHING


def test_a_client_that_stalls_mid_body_loses_its_connection(queue: Queue) -> None:
    srv = make_server(queue, read_timeout_s=0.2)
    client, conn = socket.socketpair()
    try:
        with client:
            client.sendall(request(json.dumps(payload()).encode())[:-10])
            start = time.monotonic()
            srv._httpd.finish_request(conn, CLIENT)  # returns once the read timeout gives up on the body
            srv._httpd.shutdown_request(conn)
            elapsed = time.monotonic() - start
            said = _read_all(client)
    finally:
        srv._httpd.server_close()
    assert 0.15 <= elapsed < 2.0
    assert said == b""  # no answer: the event was not received, the sender retries it
    assert queue.counts() == NOTHING


def test_a_body_that_is_not_a_webhook_payload_is_400_and_not_stored(server: WebhookServer) -> None:
    answer = exchange(server, request(b"{not json"))
    assert answer.status == 400 and set(answer.body) == {"error"}
    assert answer.body["error"].startswith("webhook body: not JSON")
    answer = exchange(server, request({"hello": "world"}))
    assert (answer.status, answer.body) == (400, {"error": "webhook body: Object missing required field `event`"})
    assert server.queue.counts() == NOTHING


# -- paths ---------------------------------------------------------------------------------------------------------


def test_webhook_paths_and_query_strings(server: WebhookServer, queue: Queue) -> None:
    assert exchange(server, request(payload("org/a"), path="/webhook?delivery=1")).status == 200
    assert exchange(server, request(payload("org/b"), path="/")).status == 200
    for path in ("/webhook/", "/webhooks", "/WEBHOOK", "/healthz"):
        answer = exchange(server, request(payload("org/c"), path=path))
        assert (answer.status, answer.body) == (404, {"error": "not found; POST webhooks to /webhook"}), path
    assert sorted(j.repo for j in queue.jobs()) == ["org/a", "org/b"]
    health = exchange(server, get("/healthz?verbose=1"))
    assert (health.status, health.body["jobs"]["queued"]) == (200, 2)


# -- the answer and what is stored ----------------------------------------------------------------------------------


def test_an_accepted_event_answer_headers_and_stored_record(server: WebhookServer, queue_db: Path) -> None:
    data = json.dumps(payload()).encode()
    answer = exchange(server, request(data), half_close=False)  # a client waiting for the answer, connection open
    job = server.queue.jobs()[0]
    assert answer.status == 200 and answer.seconds < READ_TIMEOUT_S / 2
    assert answer.headers["Content-Type"] == "application/json"
    assert answer.body == {"status": "enqueued", "event_id": 1, "job_id": job.id, "repo": "org/model",
                           "revision": sha_for("org/model"), "reason": ""}  # fmt: skip
    assert int(answer.headers["Content-Length"]) == len(json.dumps(answer.body).encode())
    assert (job.repo, job.revision, job.state, job.source) == ("org/model", sha_for("org/model"), "queued", "webhook")
    [event] = stored_events(queue_db)
    assert {k: event[k] for k in ("source", "digest", "action", "scope", "repo", "revision", "outcome", "reason",
                                  "job_id", "body")} == {
        "source": "webhook", "digest": hashlib.sha256(data).hexdigest(), "action": "update", "scope": "repo.content",
        "repo": "org/model", "revision": sha_for("org/model"), "outcome": "enqueued", "reason": "", "job_id": job.id,
        "body": data.decode()}  # fmt: skip
    assert event_digests(server.queue.path) == {hashlib.sha256(data).hexdigest()}


def test_an_ignored_event_is_stored_with_its_reason(server: WebhookServer, queue_db: Path) -> None:
    answer = exchange(server, request(payload("org/data", repo_type="dataset", action="create", scope="repo")))
    reason = "repo type 'dataset' is not a model"
    assert answer.body == {"status": "ignored", "event_id": 1, "job_id": None, "repo": None, "revision": None,
                           "reason": reason}  # fmt: skip
    [event] = stored_events(queue_db)
    assert (event["action"], event["scope"], event["outcome"], event["reason"]) == ("create", "repo", "ignored", reason)


def test_a_stray_non_utf8_byte_is_stored_replaced_and_the_event_enqueued(server: WebhookServer, queue_db: Path) -> None:
    # The payload parser skips fields it does not know without decoding them; the stored copy replaces the byte.
    data = json.dumps(payload()).encode()[:-1] + b', "note": "caf\xe9"}'
    answer = exchange(server, request(data))
    assert (answer.status, answer.body["status"]) == (200, "enqueued")
    assert stored_events(queue_db)[0]["body"].endswith('"note": "caf\ufffd"}')


def test_an_enqueue_wakes_the_given_event_and_is_logged(queue: Queue, caplog: pytest.LogCaptureFixture) -> None:
    wake = threading.Event()
    srv = WebhookServer(queue, WebhookConfig(SECRET.encode()), port=0, wake=wake)
    try:
        assert srv.wake is wake
        with caplog.at_level(logging.INFO, logger="onboard.watch.webhook"):
            exchange(srv, request(payload("org/x", repo_type="dataset")))
            assert not wake.is_set()  # stored, nothing to run: workers stay asleep
            answer = exchange(srv, request(payload("org/x")))
        assert wake.is_set()
    finally:
        srv._httpd.server_close()
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO and r.name == "onboard.watch.webhook"]
    assert infos == [f"job {answer.body['job_id']}: org/x@{sha_for('org/x')} enqueued"]


def test_a_failing_store_is_logged_and_answered_503(
    server: WebhookServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def locked(**_: object) -> None:
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(server.queue, "record_event", locked)
    with caplog.at_level(logging.ERROR, logger="onboard.watch.webhook"):
        answer = exchange(server, request(payload()))
    assert (answer.status, answer.body, answer.headers["Retry-After"]) == (
        503, {"error": "event not stored; retry later"}, "5")  # fmt: skip
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR] == [
        "could not store a webhook event: database is locked"
    ]
    assert not server.wake.is_set()


def test_an_unreadable_registry_is_logged_and_the_event_enqueued(
    queue: Queue, caplog: pytest.LogCaptureFixture
) -> None:
    from onboard.errors import OnboardError

    asked = []

    def unreadable(repo: str, revision: str) -> bool:
        asked.append((repo, revision))
        raise OnboardError("registry.sqlite3 is not a database", "check --registry")

    srv = make_server(queue, is_promoted=unreadable)
    try:
        with caplog.at_level(logging.WARNING, logger="onboard.watch.webhook"):
            answer = exchange(srv, request(payload()))
    finally:
        srv._httpd.server_close()
    assert (answer.status, answer.body["status"], answer.body["reason"]) == (200, "enqueued", "")
    assert asked == [("org/model", sha_for("org/model"))]
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        "promotion registry check failed: registry.sqlite3 is not a database"
    ]


def test_a_promoted_revision_is_asked_about_once_and_stored_without_a_job(queue: Queue, queue_db: Path) -> None:
    asked = []

    def promoted(repo: str, revision: str) -> bool:
        asked.append((repo, revision))
        return repo == "org/done"

    srv = make_server(queue, is_promoted=promoted)
    try:
        done = exchange(srv, request(payload("org/done")))
        other = exchange(srv, request(payload("org/new")))
        exchange(srv, request(payload("org/data", repo_type="dataset")))  # no revision to ask about
    finally:
        srv._httpd.server_close()
    assert asked == [("org/done", sha_for("org/done")), ("org/new", sha_for("org/new"))]
    assert done.body == {"status": "ignored", "event_id": 1, "job_id": None, "repo": "org/done",
                         "revision": sha_for("org/done"), "reason": "already promoted"}  # fmt: skip
    assert (other.body["status"], other.body["reason"]) == ("enqueued", "")
    assert [e["reason"] for e in stored_events(queue_db)][:2] == ["already promoted", ""]
    assert [j.repo for j in queue.jobs()] == ["org/new"]


# -- the replay window ---------------------------------------------------------------------------------------------


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """The queue's wall clock, set by the test (received_at and the replay window are read from it)."""
    now = SimpleNamespace(t=1_000_000.0)
    monkeypatch.setattr(queue_module, "time", SimpleNamespace(time=lambda: now.t))
    return now


def test_the_replay_window_is_inclusive_at_its_end(queue: Queue, clock: SimpleNamespace) -> None:
    srv = make_server(queue, replay_window_s=100.0)
    try:
        data = request(payload())
        first = exchange(srv, data).body
        clock.t += 100.0  # exactly the window: still the same delivery
        replay = exchange(srv, data).body
        assert replay == {"status": "replay", "event_id": first["event_id"], "job_id": first["job_id"],
                          "repo": "org/model", "revision": sha_for("org/model"),
                          "reason": "same payload already received"}  # fmt: skip
        clock.t += 0.5  # past it: a new delivery of a known revision
        assert exchange(srv, data).body["status"] == "deduped"
    finally:
        srv._httpd.server_close()
    assert queue.counts()["events"] == 2


def test_a_zero_replay_window_stores_every_delivery(queue: Queue, clock: SimpleNamespace) -> None:
    srv = make_server(queue, replay_window_s=0.0)
    try:
        answers = [exchange(srv, request(payload())).body["status"] for _ in range(3)]
    finally:
        srv._httpd.server_close()
    assert answers == ["enqueued", "deduped", "deduped"]
    assert queue.counts()["events"] == 3


def test_the_default_replay_window_is_a_day(queue: Queue, clock: SimpleNamespace) -> None:
    srv = WebhookServer(queue, WebhookConfig(SECRET.encode()), port=0)
    try:
        data = request(payload())
        exchange(srv, data)
        clock.t += 24 * 3600.0
        assert exchange(srv, data).body["status"] == "replay"
        clock.t += 1.0
        assert exchange(srv, data).body["status"] == "deduped"
    finally:
        srv._httpd.server_close()
