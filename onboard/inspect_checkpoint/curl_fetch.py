"""Range GETs sent all at once through libcurl's multi interface (pycurl), one thread driving every transfer in C.

Why: hub inspect asks every shard for its header at once (163 range requests for a 671B checkpoint) and is bound by
the Python work per request, under one GIL. Sent through huggingface_hub's client, each request needs a worker
thread blocked in its backoff, httpx's request and response objects, and httpcore/h11 reading the socket in Python
(~0.6 ms of CPU one at a time, more with a hundred threads waking each other). Here the caller hands its requests to
one loop thread and gets each outcome through a callback; libcurl connects, sends, receives and parses in C with the
GIL released. Measured on bench_inspect_hub.py's 163 shards: hub inspect 330-380 ms, against 450-500 ms through
huggingface_hub's client and httpcore, and 390-420 ms with libcurl as a transport under that client (tried first:
a worker thread per request still runs its backoff and httpx's objects).

This module only moves bytes: a first try. What to do with an answer that is not a clean 200/206 (huggingface_hub's
backoff for retries, Retry-After, its error classes) is the caller's (hub_headers.header_future).
"""

from __future__ import annotations

import os
import selectors
import ssl
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# Bytes curl hands over per write callback (its default is 16 KB): each callback takes the GIL, so a typical header
# (~75 KB) comes in one or two, not five.
BUFFER_BYTES = 256 << 10
MAX_REDIRECTS = 20  # huggingface_hub's client follows as many
pycurl: Any = None  # imported by `_load`: loading libcurl and its libraries takes ~23 ms, paid only when used


@dataclass
class RangeResult:
    """What came back: `error` (libcurl's code and message) when no complete answer did, else the final answer's
    status, header fields (names lower-cased; the last hop's after redirects) and body (cut at the range's end if
    the server sent more)."""

    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    received: int = 0  # body bytes that arrived, including any past the range's end
    error: tuple[int, str] | None = None


def available() -> bool:
    """pycurl is installed and can be used here: Linux (where httpx and libcurl find the same system trust store)."""
    return sys.platform.startswith("linux") and _load()


def _load() -> bool:
    global pycurl
    if pycurl is None:
        try:
            import pycurl as module
        except ImportError:
            return False
        pycurl = module
    return True


def fetch_range(
    url: str,
    headers: dict[str, str],
    end: int,
    done: Callable[[RangeResult], None],
    *,
    timeout_s: float,
    max_in_flight: int,
) -> None:
    """GET bytes 0..`end` of `url` (redirects followed), at most `max_in_flight` transfers at once; `done(result)`
    is called on the loop thread once it is over, and must not block. Needs `available()`."""
    _loop().submit(_Transfer(url, headers, end, done, timeout_s), max_in_flight)


_lock = threading.Lock()
_current: tuple[int, _Loop] | None = None  # (pid, loop): a forked child starts its own


def _loop() -> _Loop:
    global _current
    with _lock:
        if _current is None or _current[0] != os.getpid():
            _current = (os.getpid(), _Loop())
        return _current[1]


def reset() -> None:
    """Close the loop and its open connections once its transfers are done; the next fetch starts a new one (as in
    a new process: benchmarks time every repeat cold)."""
    global _current
    with _lock:
        current, _current = _current, None
    if current is not None and current[0] == os.getpid():
        current[1].close()


class _Transfer:
    """One request: its easy handle, the body kept up to the range's end, the header lines."""

    def __init__(
        self, url: str, headers: dict[str, str], end: int, done: Callable[[RangeResult], None], timeout_s: float
    ) -> None:
        self.done = done
        self.cap = end + 1  # a 200 (Range ignored) brings the whole file: keep the range's bytes, then stop
        self.chunks: list[bytes] = []
        self.kept = self.received = 0
        self.capped = False
        self.lines: list[bytes] = []
        curl = self.curl = pycurl.Curl()
        curl.setopt(pycurl.URL, url)
        curl.setopt(pycurl.HTTPHEADER, [f"{k}: {v}" for k, v in {**headers, "Range": f"bytes=0-{end}"}.items()])
        curl.setopt(pycurl.NOSIGNAL, 1)
        # Redirects (the hub sends LFS files to its CDN) as huggingface_hub's client follows them; libcurl does not
        # send the Authorization header on to another host.
        curl.setopt(pycurl.FOLLOWLOCATION, 1)
        curl.setopt(pycurl.MAXREDIRS, MAX_REDIRECTS)
        curl.setopt(pycurl.PROTOCOLS, pycurl.PROTO_HTTP | pycurl.PROTO_HTTPS)
        curl.setopt(pycurl.REDIR_PROTOCOLS, pycurl.PROTO_HTTP | pycurl.PROTO_HTTPS)
        curl.setopt(pycurl.BUFFERSIZE, BUFFER_BYTES)
        curl.setopt(pycurl.WRITEFUNCTION, self._write)
        curl.setopt(pycurl.HEADERFUNCTION, self.lines.append)
        curl.setopt(pycurl.CONNECTTIMEOUT_MS, max(1, int(timeout_s * 1000)))
        curl.setopt(pycurl.LOW_SPEED_LIMIT, 1)  # no byte for timeout_s: a read timeout, as httpx's
        curl.setopt(pycurl.LOW_SPEED_TIME, max(1, round(timeout_s)))
        cafile, capath = _trust_store()  # for any hop: a redirect may lead from http to https
        if cafile:
            curl.setopt(pycurl.CAINFO, cafile)
        if capath:
            curl.setopt(pycurl.CAPATH, capath)
        if url.startswith("https:"):
            # Wait for the first connection's TLS handshake to say whether it multiplexes (HTTP/2: the hub, its
            # CDN), then share it, rather than open one connection and handshake per request. Not over plain
            # HTTP, where curl would wait for a whole answer to learn it cannot (bimodal 360/420 ms on the
            # loopback benchmark).
            curl.setopt(pycurl.PIPEWAIT, 1)

    def _write(self, data: bytes) -> int | None:
        self.received += len(data)
        room = self.cap - self.kept
        if len(data) > room:
            if room:
                self.chunks.append(data[:room])
                self.kept += room
            self.capped = True
            return 0  # a short count aborts the transfer (CURLE_WRITE_ERROR), taken as the end in `finish`
        self.chunks.append(data)
        self.kept += len(data)
        return None

    def finish(self, error: tuple[int, str] | None) -> None:
        """On the loop thread, once curl is done with the transfer."""
        curl = self.curl
        if error is not None and self.capped and error[0] == pycurl.E_WRITE_ERROR:
            error = None
        result = RangeResult(error=error, received=self.received)
        if error is None:
            result.status = curl.getinfo(pycurl.RESPONSE_CODE)
            result.headers = _last_header_block(self.lines)
            result.body = self.chunks[0] if len(self.chunks) == 1 else b"".join(self.chunks)
        curl.close()
        try:
            self.done(result)
        except Exception:  # noqa: BLE001, S110 - a caller's bug must not stop the loop (its future then never resolves)
            pass


def _last_header_block(lines: list[bytes]) -> dict[str, str]:
    """The final answer's header fields (curl passes on every hop's, and a 100 Continue's)."""
    start = max((i for i, line in enumerate(lines) if line.startswith(b"HTTP/")), default=-1) + 1
    fields = {}
    for line in lines[start:]:
        name, sep, value = line.decode("latin-1").partition(":")
        if sep and name.strip():
            fields[name.strip().lower()] = value.strip()
    return fields


_trust: dict[tuple[str, str], tuple[str | None, str | None]] = {}


def _trust_store() -> tuple[str | None, str | None]:
    """(CA file, CA directory) as httpx's default context finds them on Linux: SSL_CERT_FILE or SSL_CERT_DIR, else
    OpenSSL's compiled-in paths (not the ones the pycurl wheel's libcurl was built with: another distribution's)."""
    key = (os.environ.get("SSL_CERT_FILE", ""), os.environ.get("SSL_CERT_DIR", ""))
    found = _trust.get(key)
    if found is None:
        if key[0]:
            found = (key[0], None)
        elif key[1]:
            found = (None, key[1])
        else:
            paths = ssl.get_default_verify_paths()
            cafile = paths.openssl_cafile if os.path.isfile(paths.openssl_cafile) else None
            capath = paths.openssl_capath if os.path.isdir(paths.openssl_capath) else None
            found = (cafile, capath)
        _trust[key] = found
    return found


class _Loop:
    """A thread running curl's multi interface on an epoll selector (no limit on descriptor numbers, unlike
    select()). Other threads only queue transfers and wake it through a pipe; only this thread touches the multi
    handle, as libcurl requires. At most `limit` transfers run at once (the rest wait in the queue), whatever the
    protocol: HTTP/2 would multiplex many on one connection, so connections are not what is bounded."""

    def __init__(self) -> None:
        self._multi = pycurl.CurlMulti()
        self._multi.setopt(pycurl.M_SOCKETFUNCTION, self._on_socket)
        self._multi.setopt(pycurl.M_TIMERFUNCTION, self._on_timer)
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._queue: deque[_Transfer] = deque()
        self._active: dict[Any, _Transfer] = {}
        self._limit = 1
        self._deadline: float | None = None  # when curl asked to be called back (time.monotonic)
        self._closing = False
        self._closed = False
        self._queue_lock = threading.Lock()  # a transfer is queued only while the loop still runs
        threading.Thread(target=self._run, name="onboard-curl", daemon=True).start()

    def submit(self, transfer: _Transfer, limit: int) -> None:
        with self._queue_lock:
            if not self._closed:
                self._limit = max(1, limit)
                self._queue.append(transfer)
                self._wake()
                return
        # The loop ended meanwhile (`reset` from another thread): the transfer ends at once, as a dropped connection.
        transfer.finish((pycurl.E_RECV_ERROR, "the transfer loop was closed"))

    def close(self) -> None:
        self._closing = True
        self._wake()

    def _wake(self) -> None:
        try:
            os.write(self._wake_w, b"\0")
        except OSError:  # the pipe is full (a wake-up is pending anyway) or already closed
            pass

    # -- curl's callbacks (on this thread, inside socket_action) ------------------------------------------------

    def _on_socket(self, what: int, fd: int, multi: Any, data: Any) -> None:
        events = {pycurl.POLL_IN: selectors.EVENT_READ, pycurl.POLL_OUT: selectors.EVENT_WRITE,
                  pycurl.POLL_INOUT: selectors.EVENT_READ | selectors.EVENT_WRITE}.get(what)  # fmt: skip
        registered = fd in self._selector.get_map()
        if events is None:  # POLL_REMOVE
            if registered:
                self._selector.unregister(fd)
        elif registered:
            self._selector.modify(fd, events)
        else:
            self._selector.register(fd, events)

    def _on_timer(self, timeout_ms: int) -> None:
        self._deadline = None if timeout_ms < 0 else time.monotonic() + timeout_ms / 1000

    # -- the loop --------------------------------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not (self._closing and not self._active and not self._queue):
                deadline = self._deadline
                timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
                for key, mask in self._selector.select(timeout):
                    if key.fd == self._wake_r:
                        self._drain_wake()
                        continue
                    flags = pycurl.CSELECT_IN if mask & selectors.EVENT_READ else 0
                    flags |= pycurl.CSELECT_OUT if mask & selectors.EVENT_WRITE else 0
                    self._multi.socket_action(key.fd, flags)
                self._start_queued()  # adding a handle sets curl's timer to 0: it starts on the timeout below
                if self._deadline is not None and self._deadline <= time.monotonic():
                    self._deadline = None  # curl sets the next one from inside the call, if it wants one
                    self._multi.socket_action(pycurl.SOCKET_TIMEOUT, 0)
                self._collect()
        finally:
            self._shut()

    def _drain_wake(self) -> None:
        try:
            while os.read(self._wake_r, 4096):
                pass
        except BlockingIOError:
            pass

    def _start_queued(self) -> None:
        while self._queue and len(self._active) < self._limit:
            transfer = self._queue.popleft()
            self._active[transfer.curl] = transfer
            self._multi.add_handle(transfer.curl)

    def _collect(self) -> None:
        ended = False
        while True:
            remaining, ok, failed = self._multi.info_read()
            for curl in ok:
                self._end(curl, None)
            for curl, code, message in failed:
                self._end(curl, (code, message))
            ended = ended or bool(ok or failed)
            if not remaining:
                break
        if ended and self._queue:  # room for the next ones; they start on the next turn's timeout action
            self._start_queued()

    def _end(self, curl: Any, error: tuple[int, str] | None) -> None:
        self._multi.remove_handle(curl)
        self._active.pop(curl).finish(error)

    def _shut(self) -> None:
        """Every transfer still here ends as a dropped connection (only if the loop itself failed), then the
        descriptors close."""
        with self._queue_lock:
            self._closed = True
            left = [*self._active.values(), *self._queue]
            self._active.clear()
            self._queue.clear()
        for transfer in left:
            transfer.finish((pycurl.E_RECV_ERROR, "the transfer loop stopped"))
        self._multi.close()
        self._selector.close()
        os.close(self._wake_r)
        os.close(self._wake_w)
