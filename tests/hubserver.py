"""A small hub-compatible HTTP server on loopback, so tests drive the *real* huggingface_hub client.

It serves local folders as model repos (one folder per revision, each with a fake 40-hex commit sha) through the
routes huggingface_hub 2.x uses: model info, tree listing, HEAD/GET `resolve` with Range. Faults are injected per
test: error statuses with the hub's `X-Error-Code`, 5xx N times then OK, latency per request, dropped connections.
Every request is counted with the bytes of body served.

Point a client at it with `endpoint=server.url` (HfApi, hf_hub_download) or `HF_ENDPOINT` read at call time by
`onboard.inspect_checkpoint.hub` (huggingface_hub itself reads HF_ENDPOINT only at import).

Extra routes (e.g. `/api/models?author=` for a later issue) plug in with `server.add_route(method, regex, handler)`;
a handler gets `(handler, match)` and writes the response with `handler.send_json(...)` or the base class methods.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import socket
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

RouteHandler = Callable[["_Handler", re.Match[str]], None]


@dataclass
class Fault:
    """Answer requests whose path contains `match` with `status` (or drop them), `times` times (None = always)."""

    match: str
    status: int = 500
    error_code: str | None = None
    times: int | None = None
    drop: bool = False
    method: str | None = None
    retry_after: int | None = None
    """Seconds sent as `Retry-After` with the fault (a 429 or 503 that asks the client to wait)."""


@dataclass
class Snapshot:
    folder: Path
    sha: str


@dataclass
class Stats:
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)
    """(method, path, Range header) per request, in arrival order."""
    bytes_served: int = 0
    times: list[float] = field(default_factory=list)
    """time.monotonic() at each request's arrival, parallel to `requests`."""
    max_in_flight: int = 0
    """The most requests the server was handling at once (latency included)."""
    auth: list[str | None] = field(default_factory=list)
    """The Authorization header of each request, parallel to `requests`."""

    def count(self, method: str | None = None, contains: str = "") -> int:
        return sum(1 for m, p, _ in self.requests if (method is None or m == method) and contains in p)


SMALL_BODY = 4 << 20  # bytes answered in one write with their headers (see _Handler._send_body)


def fake_sha(repo_id: str, revision: str) -> str:
    return hashlib.sha1(f"{repo_id}@{revision}".encode()).hexdigest()


def _file_oid(path: Path) -> str:
    st = path.stat()
    return _oid(str(path), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=4096)
def _oid(path: str, size: int, mtime_ns: int) -> str:
    # Cheap stable id: hashing multi-GB sparse benchmark files would take longer than the benchmark.
    return hashlib.sha1(f"{path}:{size}:{mtime_ns}".encode()).hexdigest()


class HubServer:
    """Threaded loopback server. Use as a context manager or via the `hub_server` fixture."""

    def __init__(self, latency: float = 0.0) -> None:
        self.repos: dict[str, dict[str, Snapshot]] = {}
        self.gated: set[str] = set()
        self.faults: list[Fault] = []
        self.latency = latency
        self.honour_range = True  # False: answer Range requests with the whole file (some proxies do)
        self.stats = Stats()
        self.in_flight = 0
        self.routes: list[tuple[str, re.Pattern[str], RouteHandler]] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- set-up ----------------------------------------------------------------------------------------------------
    def add_repo(self, repo_id: str, folder: str | Path, revision: str = "main", sha: str | None = None) -> str:
        """Serve `folder` as `repo_id` at `revision` (a branch name); returns the commit sha it resolves to."""
        sha = sha or fake_sha(repo_id, revision)
        snap = Snapshot(Path(folder), sha)
        revs = self.repos.setdefault(repo_id, {})
        revs[revision] = snap
        revs[sha] = snap
        return sha

    def add_fault(self, match: str, status: int = 500, **kw: object) -> Fault:
        fault = Fault(match, status, **kw)  # type: ignore[arg-type]
        with self._lock:
            self.faults.append(fault)
        return fault

    def add_route(self, method: str, pattern: str, handler: RouteHandler) -> None:
        """Hook for routes other issues need (checked before the built-in ones)."""
        self.routes.append((method, re.compile(pattern), handler))

    def reset_stats(self) -> None:
        with self._lock:
            self.stats = Stats()

    # -- lifecycle -------------------------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> HubServer:
        server = self

        class Handler(_Handler):
            hub = server

        class Server(ThreadingHTTPServer):
            """http.server's threading server with its default listen backlog (request_queue_size, 5), as small
            mirrors and proxies have: a client that opens many connections at once meets it here too."""

            daemon_threads = True

            def handle_error(self, request: object, client_address: object) -> None:
                # A client that stops reading on purpose (a speculative GET past its size limit, a timed-out retry)
                # resets the connection mid-write: that is the client's choice, not a server fault to print.
                if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
                    super().handle_error(request, client_address)

        self._httpd = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), name="hubserver", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> HubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- helpers used by the handler -------------------------------------------------------------------------------
    def _take_fault(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.match in path and (fault.method is None or fault.method == method):
                    if fault.times is None:
                        return fault
                    if fault.times > 0:
                        fault.times -= 1
                        return fault
        return None

    def _record(self, method: str, path: str, rng: str | None, auth: str | None = None) -> None:
        with self._lock:
            self.stats.requests.append((method, path, rng))
            self.stats.times.append(time.monotonic())
            self.stats.auth.append(auth)

    def _enter(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.stats.max_in_flight = max(self.stats.max_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def _add_bytes(self, n: int) -> None:
        with self._lock:
            self.stats.bytes_served += n


class _Handler(BaseHTTPRequestHandler):
    hub: HubServer
    protocol_version = "HTTP/1.1"  # keep-alive: the client pools connections as it would against the real hub
    # Headers and body go out in separate writes: with Nagle on, delayed ACKs would hold back every response.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def do_HEAD(self) -> None:
        self._dispatch("HEAD")

    def do_GET(self) -> None:
        self._dispatch("GET")

    # -- responses -------------------------------------------------------------------------------------------------
    def send_json(self, obj: object, status: int = 200, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
            self.hub._add_bytes(len(body))

    def send_error_code(
        self, status: int, error_code: str | None, message: str = "", extra: dict[str, str] | None = None
    ) -> None:
        headers = {"X-Error-Code": error_code} if error_code else {}
        headers.update(extra or {})
        if message:
            headers["X-Error-Message"] = message
        self.send_json({"error": message or error_code or "error"}, status, headers)

    # -- routing ---------------------------------------------------------------------------------------------------
    def _dispatch(self, method: str) -> None:
        self.hub._enter()
        try:
            self._dispatch_counted(method)
        finally:
            self.hub._leave()

    def _dispatch_counted(self, method: str) -> None:
        split = urlsplit(self.path)
        path = unquote(split.path)
        self.hub._record(method, path, self.headers.get("Range"), self.headers.get("Authorization"))
        if self.hub.latency:
            time.sleep(self.hub.latency)
        fault = self.hub._take_fault(method, path)
        if fault is not None:
            if fault.drop:
                self._drop()
                return
            extra = {"Retry-After": str(fault.retry_after)} if fault.retry_after is not None else None
            self.send_error_code(fault.status, fault.error_code, f"injected {fault.status}", extra)
            return
        for m, pattern, handler in self.hub.routes:
            match = pattern.fullmatch(path)
            if m == method and match:
                handler(self, match)
                return
        query = parse_qs(split.query)
        if m := re.fullmatch(r"/api/models/([^/]+/[^/]+)(?:/revision/(.+))?", path):
            self._model_info(m.group(1), m.group(2) or "main", "blobs" in query)
        elif m := re.fullmatch(r"/api/models/([^/]+/[^/]+)/tree/([^/]+)(?:/(.*))?", path):
            self._tree(m.group(1), m.group(2), m.group(3) or "", query.get("recursive", ["false"])[0] == "true")
        elif m := re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path):
            self._resolve(m.group(1), m.group(2), m.group(3))
        else:
            self.send_error_code(404, None, f"no route for {path}")

    def _drop(self) -> None:
        # Close the TCP connection without an answer: the client sees a dropped connection.
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _snapshot(self, repo_id: str, revision: str) -> Snapshot | None:
        revs = self.hub.repos.get(repo_id)
        if revs is None or repo_id in self.hub.gated:
            if repo_id in self.hub.gated:
                self.send_error_code(403, "GatedRepo", "Access to this repo is restricted")
            else:
                self.send_error_code(404, "RepoNotFound", "Repository not found")
            return None
        snap = revs.get(revision)
        if snap is None:
            self.send_error_code(404, "RevisionNotFound", "Invalid rev id")
        return snap

    def _files(self, snap: Snapshot) -> list[Path]:
        # lstat-based walk: a symlink is listed as a file (its target is the hub's business, not ours).
        return sorted(p for p in snap.folder.rglob("*") if p.is_file() or p.is_symlink())

    def _model_info(self, repo_id: str, revision: str, blobs: bool) -> None:
        snap = self._snapshot(repo_id, revision)
        if snap is None:
            return
        siblings = []
        for p in self._files(snap):
            rel = p.relative_to(snap.folder).as_posix()
            entry: dict[str, object] = {"rfilename": rel}
            if blobs:
                size = p.lstat().st_size if p.is_symlink() and not p.exists() else p.stat().st_size
                entry.update(size=size, blobId=_file_oid(p) if p.exists() else "0" * 40)
            siblings.append(entry)
        info = {"id": repo_id, "modelId": repo_id, "sha": snap.sha, "private": False, "gated": False,
                "disabled": False, "tags": [], "siblings": siblings}  # fmt: skip
        self.send_json(info)

    def _tree(self, repo_id: str, revision: str, sub: str, recursive: bool) -> None:
        snap = self._snapshot(repo_id, revision)
        if snap is None:
            return
        root = snap.folder / sub
        items = root.rglob("*") if recursive else root.glob("*")
        out = []
        for p in sorted(items):
            rel = p.relative_to(snap.folder).as_posix()
            if p.is_dir() and not p.is_symlink():
                out.append({"type": "directory", "oid": "0" * 40, "size": 0, "path": rel})
            else:
                size = p.stat().st_size if p.exists() else 0
                out.append({"type": "file", "oid": _file_oid(p) if p.exists() else "0" * 40, "size": size, "path": rel})
        self.send_json(out)

    def _resolve(self, repo_id: str, revision: str, filename: str) -> None:
        snap = self._snapshot(repo_id, revision)
        if snap is None:
            return
        path = snap.folder / filename
        try:
            st = os.stat(path) if ".." not in Path(filename).parts else None
        except OSError:
            st = None
        if st is None or not stat.S_ISREG(st.st_mode):
            self.send_error_code(404, "EntryNotFound", f"{filename} does not exist")
            return
        size = st.st_size
        start, end, status = 0, size - 1, 200
        rng = self.headers.get("Range")
        if rng and self.hub.honour_range and (m := re.fullmatch(r"bytes=(\d+)-(\d*)", rng.strip())):
            start = int(m.group(1))
            end = min(int(m.group(2)) if m.group(2) else size - 1, size - 1)
            status = 206
            if start >= size:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
        length = max(0, end - start + 1)
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(length))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", f'"{_oid(str(path), st.st_size, st.st_mtime_ns)}"')
        self.send_header("X-Repo-Commit", snap.sha)
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        if self.command == "HEAD":
            self.end_headers()
            return
        sent = self._send_body(path, start, length)
        self.hub._add_bytes(sent)

    def _send_body(self, path: Path, start: int, length: int) -> int:
        """The headers and the body's bytes. A body up to SMALL_BODY goes out with the headers in one write: each
        system call lets another of the server's threads take the GIL, and with many ranges answered at once those
        hand-overs would delay the answers beyond the latency asked for."""
        fd = os.open(path, os.O_RDONLY)
        try:
            if length <= SMALL_BODY:
                body = os.pread(fd, length, start)
                self._headers_buffer.append(b"\r\n")  # end_headers' blank line, sent with the body
                self.wfile.write(b"".join(self._headers_buffer) + body)
                self._headers_buffer = []
                return len(body)
            self.end_headers()
            sent = 0
            while sent < length:
                chunk = os.pread(fd, min(length - sent, 1 << 20), start + sent)
                if not chunk:
                    break
                self.wfile.write(chunk)
                sent += len(chunk)
            return sent
        finally:
            os.close(fd)


def serve_main(argv: list[str] | None = None) -> None:
    """Run the server in its own process (benchmarks: the client's threads then do not share its GIL).

    `python -m tests.hubserver --repo org/name=DIR [--latency 0.05]` (from the repo root) prints the URL, then serves until killed.
    `GET /_stats` returns {"bytes_served", "requests", "max_in_flight", "shard_requests"}; `GET /_reset` zeroes them
    (neither is counted).
    """
    import argparse
    import sys

    parser = argparse.ArgumentParser(description="loopback hub server")
    parser.add_argument("--repo", action="append", default=[], help="org/name=DIR (repeatable)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every request")
    args = parser.parse_args(argv)
    server = HubServer(latency=args.latency)
    for spec in args.repo:
        repo_id, folder = spec.split("=", 1)
        server.add_repo(repo_id, folder)

    def stats(handler: _Handler, match: re.Match[str]) -> None:
        with server._lock:
            server.stats.requests.pop()  # the stats request itself does not count
            server.stats.times.pop()
            server.stats.auth.pop()
            body = {"bytes_served": server.stats.bytes_served, "requests": len(server.stats.requests),
                    "max_in_flight": server.stats.max_in_flight,
                    "shard_requests": sum(1 for r in server.stats.requests if r[1].endswith(".safetensors"))}  # fmt: skip
        handler.send_json(body)

    def reset(handler: _Handler, match: re.Match[str]) -> None:
        server.reset_stats()
        handler.send_json({"ok": True})

    server.add_route("GET", "/_stats", stats)
    server.add_route("GET", "/_reset", reset)
    server.start()
    print(server.url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        sys.exit(0)


@pytest.fixture
def hub_server() -> Iterator[HubServer]:
    """A started HubServer, stopped after the test."""
    with HubServer() as server:
        yield server


@pytest.fixture
def hub_env(hub_server: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> HubServer:
    """hub_server + an environment pointing onboard at it: HF_ENDPOINT, a fresh HF cache, online, fast retries."""
    from huggingface_hub import constants

    from onboard.inspect_checkpoint import hub

    monkeypatch.setenv("HF_ENDPOINT", hub_server.url)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache" / "hub"))
    monkeypatch.delenv("ONBOARD_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # read by huggingface_hub at import time
    monkeypatch.setattr(hub, "RETRY_BASE_S", 0.0)
    return hub_server


if __name__ == "__main__":
    serve_main()
