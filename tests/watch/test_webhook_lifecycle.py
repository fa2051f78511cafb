"""The webhook server as a service: started, it answers on loopback from daemon threads; stopped, it stops at once.

`onboard webhook serve` stops on SIGINT/SIGTERM with `stop()`: that must not wait out a client stalled mid-request
(its handler thread is a daemon, dropped with the process; the sender retries an event it never had answered), and
a started server must not keep the interpreter alive on its own.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from pathlib import Path

import pytest

from onboard.watch.queue import Queue
from onboard.watch.webhook import WebhookConfig, WebhookServer
from tests.watch.helpers import SECRET


def _health(url: str) -> tuple[int, dict]:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request("GET", "/healthz")
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def test_a_started_server_answers_from_daemon_threads_and_stops_at_once(queue_db: Path) -> None:
    before = set(threading.enumerate())
    stopped_in = []
    with Queue(queue_db) as queue:
        for _ in range(3):  # three servers: one slow answer on a busy machine must not hide a slow stop
            server = WebhookServer(queue, WebhookConfig(SECRET.encode()), port=0)
            assert server.url.startswith("http://127.0.0.1:")
            server.start()
            try:
                assert _health(server.url) == (200, {"ok": True, "jobs": {"queued": 0, "running": 0, "done": 0,
                                                                          "failed": 0, "events": 0}})  # fmt: skip
                started = [t for t in threading.enumerate() if t not in before]
                assert started and all(t.daemon for t in started)  # nothing here keeps the process alive
            finally:
                begin = time.monotonic()
                server.stop()  # right after a request: about one poll interval of the accept loop to wait out
                stopped_in.append(time.monotonic() - begin)
            with pytest.raises(OSError):
                _health(server.url)
    assert max(stopped_in) < 0.8, stopped_in


def test_stop_is_not_held_by_a_client_stalled_mid_request(queue_db: Path) -> None:
    with Queue(queue_db) as queue:
        server = WebhookServer(queue, WebhookConfig(SECRET.encode(), read_timeout_s=8.0), port=0).start()
        host, port = server._httpd.server_address[:2]
        stalled = socket.create_connection((host, port), timeout=10)
        try:
            stalled.sendall(b"POST /webhook HTTP/1.1\r\nContent-Length: 100\r\n")  # headers never finished
            assert _health(server.url)[0] == 200  # accepted after the stalled one: its handler thread is running
            begin = time.monotonic()
            server.stop()
            assert time.monotonic() - begin < 3.0  # not the 8 s read timeout
        finally:
            stalled.close()
