"""A small HTTP proxy in front of a real engine for the load-replay fault tests: forwards every request, and in a
fault mode perturbs the logprobs of some streamed completions.

- `concurrent`: completions that had another completion in flight at any time of their life;
- `cache_hit`: completions whose prompt the engine served partly from its prefix cache (the engine's own
  usage.prompt_tokens_details.cached_tokens in the stream's last event);
- `late`: every completion, from generated token LATE_FROM on (a replica whose decode goes wrong past a step);
- `clean`: nothing.

Streams are buffered whole (the verdict may depend on the last event), then sent on. `stop()` closes the listener,
as an endpoint that goes away. Test code: the default listen backlog, stdlib http.server and urllib.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SHIFT = 0.7  # nats added to the top logprob of every step: far past float32 noise, tokens unchanged
LATE_FROM = 2


class LoadProxy:
    def __init__(self, upstream: str, mode: str = "clean") -> None:
        self.upstream, self.mode = upstream, mode
        self.lock = threading.Lock()
        self.active: dict[int, bool] = {}  # request serial -> overlapped another completion
        self.serial = 0
        self.perturbed = 0
        self.completions = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                return

            def do_GET(self) -> None:  # noqa: N802 (http.server naming)
                self._forward(None)

            def do_POST(self) -> None:  # noqa: N802
                self._forward(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

            def _forward(self, body: bytes | None) -> None:
                completion = body is not None and self.path.endswith("/completions")
                serial = proxy._enter() if completion else None
                request = urllib.request.Request(proxy.upstream + self.path, data=body, method=self.command)
                request.add_header("Content-Type", "application/json")
                try:
                    with urllib.request.urlopen(request, timeout=300) as resp:  # noqa: S310 (loopback)
                        status, payload = resp.status, resp.read()
                        kind = resp.headers.get("Content-Type", "application/json")
                except urllib.error.HTTPError as exc:
                    status, payload, kind = exc.code, exc.read(), "application/json"
                overlapped = proxy._leave(serial) if serial is not None else False
                if completion and status == 200 and "text/event-stream" in kind:
                    payload = proxy._maybe_perturb(payload, overlapped)
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # --- in-flight bookkeeping -------------------------------------------------------------------------------------
    def _enter(self) -> int:
        with self.lock:
            self.serial += 1
            overlapping = bool(self.active)
            for key in self.active:
                self.active[key] = True
            self.active[self.serial] = overlapping
            return self.serial

    def _leave(self, serial: int) -> bool:
        with self.lock:
            return self.active.pop(serial)

    # --- the fault -------------------------------------------------------------------------------------------------
    def _maybe_perturb(self, payload: bytes, overlapped: bool) -> bytes:
        lines = payload.decode().split("\n")
        events = [json.loads(line[5:]) for line in lines if line.startswith("data:") and line[5:].strip() != "[DONE]"]
        usage = next((e["usage"] for e in reversed(events) if e.get("usage")), None) or {}
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
        with self.lock:
            self.completions += 1
        if not {"concurrent": overlapped, "cache_hit": cached > 0, "late": True}.get(self.mode, False):
            return payload
        with self.lock:
            self.perturbed += 1
        out, steps = [], {}  # choice index -> generated tokens seen so far
        skip = LATE_FROM if self.mode == "late" else 0
        for line in lines:
            if line.startswith("data:") and line[5:].strip() != "[DONE]":
                line = "data: " + json.dumps(_shifted(json.loads(line[5:]), steps, skip))
            out.append(line)
        return "\n".join(out).encode()


def _shifted(event: dict[str, Any], steps: dict[int, int], skip: int) -> dict[str, Any]:
    for choice in event.get("choices") or []:
        lp = choice.get("logprobs") or {}
        for top in lp.get("top_logprobs") or []:
            seen = steps.get(choice.get("index", 0), 0)
            steps[choice.get("index", 0)] = seen + 1
            if top and seen >= skip:
                best = max(top, key=lambda k: top[k])
                top[best] = top[best] + SHIFT
    return event
