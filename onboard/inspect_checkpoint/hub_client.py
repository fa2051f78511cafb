"""The HTTP client hub requests go through: how many are in flight at once, and huggingface_hub's client with one
connection pool per worker thread (installed in huggingface_hub, so its backoff still sends and retries every
request but the header ranges' first tries, which hub may send through libcurl). `hub` is the only user; this holds no
hub logic."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

from onboard.errors import InputError

CONCURRENCY_ENV = "ONBOARD_HUB_CONCURRENCY"
# Requests in flight at once through huggingface_hub's client, one worker thread each: below the 100 connections its
# default httpx client pools (so the limit is ours even where `install_client` leaves that client in place); a
# 163-shard checkpoint costs two waves of headers (64 measured no better on CPU or wall than 96, load ~4).
DEFAULT_CONCURRENCY = 96
# Header ranges in flight at once when libcurl sends their first tries (no thread per request): every shard of the
# largest common checkpoints in one wave (DeepSeek-V3's 163, Llama-3.1-405B's 191). 128 left 35 of 163 shards for a
# second wave: 10-20 ms more on bench_inspect_hub.py.
CURL_CONCURRENCY = 192


def concurrency(curl: bool = False) -> int:
    """Requests in flight at once: $ONBOARD_HUB_CONCURRENCY, else CURL_CONCURRENCY for libcurl's first tries
    (`curl`) and DEFAULT_CONCURRENCY for requests through huggingface_hub's client."""
    raw = os.environ.get(CONCURRENCY_ENV, "").strip()
    if not raw:
        return CURL_CONCURRENCY if curl else DEFAULT_CONCURRENCY
    if not raw.isdigit() or int(raw) < 1:
        raise InputError(f"{CONCURRENCY_ENV}={raw!r} is not a positive whole number",
                         f"set {CONCURRENCY_ENV} to the number of hub requests allowed in flight, e.g. 64, or unset it")  # fmt: skip
    return int(raw)


def start_workers(pool: Any, count: int | Callable[[], int]) -> threading.Thread:
    """Start `count` worker threads of `pool` (a ThreadPoolExecutor) from a background thread, and return it.
    `count` may be a function, called first on that thread (it may import what deciding takes: hub's check for
    libcurl loads ~23 ms of shared libraries, paid there while the caller waits on the network).

    Why: the executor starts a worker per submit while none is idle, and each start waits until the new thread runs;
    with workers already sending requests, that wait is a GIL hand-off (5 ms switch interval) per thread. Started
    while the caller waits on the network (the listing), they cost nothing there. The placeholder tasks hold each
    worker until all are started (an idle worker would otherwise take the next one, and fewer threads start); real
    tasks submitted meanwhile queue behind them for a few milliseconds."""
    release = threading.Event()

    def hold() -> None:
        release.wait(START_WAIT_S)

    def start() -> None:
        try:
            for _ in range(count() if callable(count) else count):
                pool.submit(hold)
        except RuntimeError:  # the pool was shut down first (the source closed early): nothing to start
            pass
        finally:
            release.set()

    starter = threading.Thread(target=start, name="onboard-hub-start", daemon=True)
    starter.start()
    return starter


START_WAIT_S = 5.0
"""Longest a placeholder holds its worker: only if the starting thread were stopped before releasing them."""

_lock = threading.Lock()
_checked = False


def install_client() -> bool:
    """Give huggingface_hub's shared client (the one its backoff sends every request through) one connection pool
    per worker thread, once per process, before onboard's first request. Returns whether huggingface_hub's client is
    this one (hub_headers.first_try_by_curl sends header ranges outside it only then).

    Why: huggingface_hub's default client has one httpx pool for the process, and httpcore scans every connection
    of it, under its lock, twice per request; with ~96 header requests in flight that scan is about a quarter of a
    request's CPU under cProfile (hub inspect of a 163-shard checkpoint is CPU-bound; its header requests cost
    110-125 ms CPU). Plain-http pools (a loopback or local mirror) also skip the ~20 ms CA-bundle load of an SSL
    context they never use. The client is otherwise
    huggingface_hub's own (`default_client_factory`: its request hook, redirects, no client timeout), installed with
    its public `set_client_factory`, so retries, Retry-After and 429 stay with its backoff. Left alone when the
    process has set its own factory, or when proxy variables are set (httpx reads those only without a custom
    transport). `set_client_factory` closes the current session; it is reopened on the next request."""
    global _checked
    if not _checked:
        _install()
    from huggingface_hub.utils import _http

    return getattr(_http, "_GLOBAL_CLIENT_FACTORY", None) is client_factory


def _install() -> None:
    global _checked
    with _lock:
        if _checked:
            return
        import urllib.request

        from huggingface_hub import set_client_factory
        from huggingface_hub.utils import _http

        if (
            getattr(_http, "_GLOBAL_CLIENT_FACTORY", None) is _http.default_client_factory
            and not urllib.request.getproxies()
        ):
            set_client_factory(client_factory)
        _checked = True  # only now: a thread that saw it set must not pick up the session being closed


def client_factory() -> Any:
    """huggingface_hub's `default_client_factory`, with a `ThreadPools` transport (see `install_client`)."""
    import httpx2
    from huggingface_hub.utils._http import hf_request_event_hook

    return httpx2.Client(event_hooks={"request": [hf_request_event_hook]}, follow_redirects=True, timeout=None,
                         transport=thread_pools(concurrency()))  # fmt: skip


def thread_pools(slots: int) -> Any:
    """An httpx transport that sends each thread's requests through one of `slots` small pools per scheme (threads
    take the slots in turn, so a process's worker threads each get their own while there are at most `slots`)."""
    import ssl

    import httpx2

    class ThreadPools(httpx2.BaseTransport):
        def __init__(self) -> None:
            self._pools: dict[tuple[str, int], Any] = {}
            self._local = threading.local()
            self._turn = 0
            self._lock = threading.Lock()
            self._contexts: dict[str, ssl.SSLContext] = {}

        def _context(self, scheme: str) -> ssl.SSLContext:
            """One context for all pools (making one costs ~20 ms: the CA bundle), made on the first https request.
            Plain HTTP pools never use theirs: a bare TLS client context (it trusts no CA, so verifies no one)."""
            if scheme not in self._contexts:
                https = scheme == "https"
                self._contexts[scheme] = (
                    httpx2.create_ssl_context() if https else ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
                )
            return self._contexts[scheme]

        def handle_request(self, request: httpx2.Request) -> httpx2.Response:
            scheme = request.url.scheme
            pool = getattr(self._local, scheme, None)
            if pool is None:
                with self._lock:
                    slot = getattr(self._local, "slot", None)
                    if slot is None:
                        slot = self._local.slot = self._turn % slots
                        self._turn += 1
                    pool = self._pools.get((scheme, slot))
                    if pool is None:
                        limits = httpx2.Limits(max_connections=None, max_keepalive_connections=4)
                        pool = self._pools[scheme, slot] = httpx2.HTTPTransport(verify=self._context(scheme),
                                                                                limits=limits)  # fmt: skip
                setattr(self._local, scheme, pool)
            return pool.handle_request(request)

        def close(self) -> None:
            with self._lock:
                pools = list(self._pools.values())
            for pool in pools:
                pool.close()

    return ThreadPools()
