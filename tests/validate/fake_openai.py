"""A small OpenAI-compatible server on loopback that misbehaves on purpose (fault tests), backed by a real engine.

The engine is a real in-process model (no canned answers): greedy completions with logprobs, but like some engines
it has no prompt_logprobs, echo or logit_bias (400 Bad Request), so capability detection has something to detect.
`mode` picks the fault: ok, slow, truncated, malformed, no_choices, http500, stream_cut, stream_stall, bad_shape (choices is not
a list), rate_limited (the first completion is refused with 429 and Retry-After: 1; arrival times in `posts`).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

UNSUPPORTED = ("prompt_logprobs", "echo", "logit_bias")


class FakeServer:
    def __init__(self, engine: Any, mode: str = "ok", served: str = "tiny") -> None:
        self.engine, self.mode, self.served = engine, mode, served
        self.lock = threading.Lock()  # the engine is one torch model: one request at a time
        self.posts: list[float] = []  # monotonic arrival time of every POST
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                return

            def do_GET(self) -> None:  # noqa: N802 (http.server naming)
                if server.mode == "malformed":
                    return self._raw(200, b"<html>not json")
                if self.path == "/v1/models":
                    return self._json(200, {"object": "list", "data": [{"id": server.served}]})
                return self._json(404, {"error": "not found"})

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                mode = server.mode
                server.posts.append(time.monotonic())
                if mode == "rate_limited" and len(server.posts) == 1:
                    self.send_response(429)
                    self.send_header("Retry-After", "1")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if mode == "bad_shape":
                    return self._json(200, {"choices": {"index": 0}})
                if mode == "slow":
                    time.sleep(3.0)
                if mode == "malformed":
                    return self._raw(200, b'{"choices": [')
                if mode == "truncated":
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", "1000")
                    self.end_headers()
                    self.wfile.write(b'{"choices": [{"index": 0')
                    self.wfile.flush()
                    self.close_connection = True
                    return
                if mode == "no_choices":
                    return self._json(200, {"object": "text_completion"})
                if mode == "http500":
                    return self._json(500, {"error": "engine crashed"})
                if any(body.get(k) for k in UNSUPPORTED):
                    return self._json(400, {"error": f"unsupported parameter among {UNSUPPORTED}"})
                with server.lock:
                    if body.get("stream"):
                        return self._stream(body, cut=(mode == "stream_cut"))
                    return self._json(200, server.complete(body))

            def _stream(self, body: dict[str, Any], cut: bool) -> None:
                doc = server.complete(body)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for choice in doc["choices"]:
                    lp = choice["logprobs"]
                    for t in range(len(lp["tokens"])):
                        last = t == len(lp["tokens"]) - 1
                        event = {"choices": [{"index": choice["index"], "finish_reason": choice["finish_reason"] if last else None,
                                              "logprobs": {k: lp[k][t : t + 1] for k in ("tokens", "token_logprobs", "top_logprobs")}}]}  # fmt: skip
                        self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                        if server.mode == "stream_stall":  # the first token arrives, then nothing for 3 s
                            self.wfile.flush()
                            time.sleep(3.0)
                            return
                        if cut:
                            self.close_connection = True
                            return
                self.wfile.write(b"data: [DONE]\n\n")

            def _json(self, code: int, doc: dict[str, Any]) -> None:
                self._raw(code, json.dumps(doc).encode())

            def _raw(self, code: int, data: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        prompt = body["prompt"]
        prompts = prompt if prompt and isinstance(prompt[0], list) else [prompt]
        k = int(body.get("logprobs") or 1)
        gens = self.engine.generate(
            prompts, int(body.get("max_tokens", 16)), k, ignore_eos=bool(body.get("ignore_eos"))
        )
        choices = []
        for i, g in enumerate(gens):
            choices.append({
                "index": i,
                "finish_reason": g.finish_reason,
                "logprobs": {
                    "tokens": [f"token_id:{t}" for t in g.ids],
                    "token_logprobs": [s.token_logprob for s in g.steps],
                    "top_logprobs": [{f"token_id:{a}": b for a, b in zip(s.ids[:k], s.logprobs[:k])} for s in g.steps],
                },
            })  # fmt: skip
        return {"object": "text_completion", "choices": choices}

    def __enter__(self) -> FakeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
