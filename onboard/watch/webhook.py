"""The webhook receiver: a small threaded HTTP server (stdlib) in front of the durable queue.

POST /webhook (or /) checks the secret first, in constant time, then the body's length and shape. A valid event is
committed to SQLite, with its job, *before* the 200 goes out, so an acknowledged event is never lost; one never
acknowledged is retried by the sender. A replay (same body within `replay_window_s`) answers 200 and stores nothing:
a non-2xx would only make the sender retry it. GET /healthz: job counts.

The Hugging Face payload (https://huggingface.co/docs/hub/webhooks) names the (repo, revision) to onboard, or why
there is nothing to do: `event.action` + `event.scope`; `repo.type`, `repo.name`, `repo.headSha` (the latest commit
on `main`); on content changes `updatedRefs`, a list of `{ref, oldSha, newSha}` (`newSha` null for a deleted ref).
Unknown narrower scopes (e.g. `repo.config.dois`) count as their broader scope, as the docs advise.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import sqlite3
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import msgspec

from onboard import serde
from onboard.checkpoint_id import is_commit_sha
from onboard.errors import InputError, OnboardError
from onboard.watch.queue import Queue
from onboard.watch.types import JobKey, PromotedCheck, is_repo_id, never_promoted

log = logging.getLogger("onboard.watch.webhook")

WEBHOOK_PATHS = frozenset({"/", "/webhook"})
SECRET_HEADER = "X-Webhook-Secret"
_DISCARD_LIMIT = 16 << 20  # drain at most this much of a rejected body, then just close
MAIN_REF = "refs/heads/main"

# scope → actions that can change what `new-model` would see. Everything else is stored and ignored.
RELEVANT: dict[str, frozenset[str]] = {
    "repo": frozenset({"create", "update"}),  # delete/move: nothing new to onboard
    "repo.content": frozenset({"update"}),  # new commits, tags, branches
}
# Narrower scopes fold into these broader ones before the lookup.
BROADER_SCOPES = ("repo.content", "repo.config", "repo", "discussion.comment", "discussion")


class PayloadError(InputError):
    """The body is not a Hugging Face webhook payload."""


class _Event(msgspec.Struct):
    action: str
    scope: str


class _Repo(msgspec.Struct):
    type: str | None = None
    name: str | None = None
    headSha: str | None = None  # noqa: N815 (the payload's spelling)


class _Ref(msgspec.Struct):
    ref: str
    newSha: str | None = None  # noqa: N815
    oldSha: str | None = None  # noqa: N815


class _Payload(msgspec.Struct):
    event: _Event
    repo: _Repo
    updatedRefs: list[_Ref] = []  # noqa: N815


_HINT = "send the Hugging Face webhook payload unchanged (is this a Hugging Face webhook?)"


@dataclass(frozen=True)
class ParsedEvent:
    action: str
    scope: str
    repo_type: str | None
    repo_name: str | None
    key: JobKey | None
    """The job to run; None when the event is ignored (see `reason`)."""
    reason: str = ""


def _broad_scope(scope: str) -> str:
    for broad in BROADER_SCOPES:
        if scope == broad or scope.startswith(broad + "."):
            return broad
    return scope


def _main_sha(payload: _Payload) -> tuple[str | None, str]:
    """The new sha of `main` and, when there is none, why."""
    if payload.updatedRefs:
        for ref in payload.updatedRefs:
            if ref.ref == MAIN_REF:
                return (ref.newSha, "") if ref.newSha else (None, "main was deleted")
        names = ", ".join(r.ref for r in payload.updatedRefs)
        return None, f"only {MAIN_REF} is onboarded (updated: {names})"
    if payload.repo.headSha:
        return payload.repo.headSha, ""
    return None, "no repo.headSha (an empty repo has nothing to onboard yet)"


def parse_payload(payload: bytes | Any) -> ParsedEvent:
    """Decide what one webhook payload (the raw body, or already-parsed JSON) asks for. Raises PayloadError naming
    the field when it is not a webhook payload at all."""
    if isinstance(payload, (bytes, str)):
        parsed: _Payload = serde.decode_json(payload, _Payload, "webhook body", _HINT, PayloadError)
    else:
        parsed = serde.convert(payload, _Payload, "webhook payload", _HINT, PayloadError)
    action, scope = parsed.event.action, parsed.event.scope
    repo_type, name = parsed.repo.type, parsed.repo.name

    def ignored(reason: str) -> ParsedEvent:
        return ParsedEvent(action, scope, repo_type, name, None, reason)

    broad = _broad_scope(scope)
    if broad == "repo.config" or broad not in RELEVANT:
        return ignored(f"scope {scope!r} does not change the model files")
    if action not in RELEVANT[broad] and scope == broad:
        return ignored(f"action {action!r} on {scope!r} leaves nothing new to onboard")
    if repo_type != "model":
        return ignored(f"repo type {repo_type!r} is not a model")
    if name is None or not is_repo_id(name):
        return ignored(f"repo.name {name!r} is not a hub model id")
    sha, why = _main_sha(parsed)
    if sha is None:
        return ignored(why)
    if not is_commit_sha(sha):  # the hub sends full shas; anything else would only fail later, in the job
        return ignored(f"revision {sha!r} is not a commit sha (40 hex digits)")
    return ParsedEvent(action, scope, repo_type, name, JobKey(name, sha))


@dataclass(frozen=True)
class WebhookConfig:
    secret: bytes
    max_body_bytes: int = 1 << 20  # real payloads are a few KB
    replay_window_s: float = 24 * 3600.0
    read_timeout_s: float = 10.0
    """A client that stalls mid-body loses its connection instead of holding a thread."""
    is_promoted: PromotedCheck = never_promoted


class WebhookServer:
    """Owns the HTTP server; `wake` is set whenever a new job is enqueued (workers wait on it)."""

    def __init__(
        self,
        queue: Queue,
        config: WebhookConfig,
        host: str = "127.0.0.1",
        port: int = 8080,
        wake: threading.Event | None = None,
    ) -> None:
        if not config.secret:
            raise ValueError("an empty webhook secret would accept anyone")
        self.queue, self.config, self.wake = queue, config, wake or threading.Event()
        service = self

        class Handler(_Handler):
            owner = service

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 1024  # a burst must not overflow the listen backlog (clients would stall on SYN)

        self._httpd = Server((host, port), Handler)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def serve_forever(self) -> None:
        self._httpd.serve_forever(poll_interval=0.2)

    def start(self) -> WebhookServer:
        self._thread = threading.Thread(target=self.serve_forever, name="webhook", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> WebhookServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Handler(BaseHTTPRequestHandler):
    owner: WebhookServer
    server_version = "onboard-webhook"
    sys_version = ""

    def setup(self) -> None:
        self.timeout = self.owner.config.read_timeout_s
        super().setup()

    def log_message(self, format: str, *args: object) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def _reply(self, status: int, obj: dict[str, object], headers: dict[str, str] | None = None) -> None:
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def _discard_body(self, length: int | None, cap: int = _DISCARD_LIMIT) -> None:
        # Closing a socket with unread input sends RST, and the client may then never read our status line.
        # `cap` bounds what an unauthenticated client can make us read; past it we just close.
        remaining = min(length or 0, cap)
        if remaining < (length or 0):
            self.close_connection = True
        try:
            while remaining > 0 and (chunk := self.rfile.read(min(remaining, 65536))):
                remaining -= len(chunk)
        except OSError:
            pass

    def do_GET(self) -> None:
        if urlsplit(self.path).path == "/healthz":
            self._reply(200, {"ok": True, "jobs": self.owner.queue.counts()})
        else:
            self._reply(404, {"error": "not found"})

    def do_POST(self) -> None:
        config = self.owner.config
        length_header = self.headers.get("Content-Length")
        length = int(length_header) if length_header and length_header.isdigit() else None
        if urlsplit(self.path).path not in WEBHOOK_PATHS:
            self._discard_body(length, config.max_body_bytes)
            self._reply(404, {"error": "not found; POST webhooks to /webhook"})
            return
        given = self.headers.get(SECRET_HEADER, "").encode("latin-1", "replace")
        if not hmac.compare_digest(given, config.secret):
            self._discard_body(length, config.max_body_bytes)
            log.warning("rejected a webhook from %s: wrong or missing %s", self.address_string(), SECRET_HEADER)
            self._reply(401, {"error": f"wrong or missing {SECRET_HEADER}"})
            return
        if self.headers.get("Transfer-Encoding") or length is None:
            self.close_connection = True
            self._reply(411, {"error": "a Content-Length is required"})
            return
        if length > config.max_body_bytes:
            self._discard_body(length)
            self.close_connection = True
            self._reply(413, {"error": f"body of {length} bytes exceeds the limit of {config.max_body_bytes}"})
            return
        body = self.rfile.read(length)
        if len(body) != length:
            self.close_connection = True
            self._reply(400, {"error": "body shorter than its Content-Length"})
            return
        self._accept(body)

    def _accept(self, body: bytes) -> None:
        config = self.owner.config
        try:
            parsed = parse_payload(body)
        except PayloadError as exc:
            self._reply(400, {"error": exc.message})
            return
        skip, reason = False, parsed.reason
        if parsed.key is not None:
            try:
                skip = config.is_promoted(parsed.key.repo, parsed.key.revision)
            except OnboardError as exc:  # registry unreadable: enqueue anyway, the worker checks again
                log.warning("promotion registry check failed: %s", exc.message)
            reason = "already promoted" if skip else reason
        try:
            receipt = self.owner.queue.record_event(
                source="webhook",
                digest=hashlib.sha256(body).hexdigest(),
                body=body.decode("utf-8", "replace"),
                key=parsed.key,
                action=parsed.action,
                scope=parsed.scope,
                reason=reason,
                replay_window_s=config.replay_window_s,
                skip=skip,
            )
        except (sqlite3.Error, OnboardError) as exc:
            # Not stored, so not acknowledged: the sender retries later.
            log.error("could not store a webhook event: %s", exc)
            self._reply(503, {"error": "event not stored; retry later"}, {"Retry-After": "5"})
            return
        if receipt.status == "enqueued":
            log.info("job %s: %s@%s enqueued", receipt.job_id, parsed.key.repo, parsed.key.revision)  # type: ignore[union-attr]
            self.owner.wake.set()
        key = receipt.key
        ids = {"status": receipt.status, "event_id": receipt.event_id, "job_id": receipt.job_id}
        self._reply(200, {**ids, "repo": key and key.repo, "revision": key and key.revision, "reason": receipt.reason})
