"""llama.cpp's engine (llama_cpp.Llama) behind the subset of the OpenAI completions API that
`onboard.validate_serving.endpoint.EndpointCandidate` uses: token-id prompts, per-id `logprobs`, vLLM-style
`prompt_logprobs`, `return_tokens_as_token_ids`, `ignore_eos`, `logit_bias`, streaming; plus `/tokenize` and `/health`.
llama-cpp-python's own server takes text prompts only and keys logprobs by token text. Greedy only; one sequence at
a time. Standalone (stdlib, numpy, llama_cpp), run by .venv-llamacpp's python, where onboard is not installed.
"""

from __future__ import annotations

import argparse
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np


def log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits.astype(np.float64) - logits.max()
    return shifted - np.log(np.exp(shifted).sum())


def top_entries(lp: np.ndarray, k: int) -> list[tuple[int, float]]:
    k = max(0, min(k, lp.shape[0]))
    idx = np.argpartition(-lp, k - 1)[:k] if k else np.array([], dtype=int)
    return sorted(((int(i), float(lp[i])) for i in idx), key=lambda t: -t[1])


class Engine:
    def __init__(self, model: str, n_ctx: int, threads: int | None, prompt_cache: bool = False) -> None:
        from llama_cpp import Llama

        self.llm = Llama(
            model_path=model,
            n_ctx=n_ctx,
            n_batch=min(512, n_ctx),
            logits_all=True,
            n_threads=threads,
            verbose=False,
            seed=0,
        )
        self.lock = threading.Lock()
        self.n_ctx = n_ctx
        self.prompt_cache = prompt_cache and not (self.llm._is_recurrent or self.llm._is_hybrid)
        self.cached = 0
        """Prompt tokens the last generation took from the KV cache (its usage's cached_tokens)."""

    def is_eog(self, token: int) -> bool:
        import llama_cpp

        return bool(llama_cpp.llama_vocab_is_eog(self.llm._model.vocab, token))

    def forward(self, tokens: list[int]) -> np.ndarray:
        """Logits at every position of `tokens`, from a cleared context."""
        if len(tokens) > self.n_ctx:
            raise ValueError(f"{len(tokens)} tokens exceed the context ({self.n_ctx})")
        self.llm.reset()
        self.llm.eval(tokens)
        return np.array(self.llm.scores[: len(tokens)], copy=True)

    def _prefill(self, prompt: list[int]) -> int:
        """Evaluate `prompt`; with the prompt cache (llama-server's cache_prompt), the KV entries of the longest prefix
        it shares with the previous sequence are kept and only the rest is evaluated. Returns the tokens kept."""
        kept = 0
        if self.prompt_cache:
            previous = self.llm.input_ids[: self.llm.n_tokens].tolist()
            limit = min(len(previous), len(prompt) - 1)  # the last prompt token is evaluated: its logits are needed
            while kept < limit and previous[kept] == prompt[kept]:
                kept += 1
        self.llm.reset()
        self.llm.n_tokens = kept
        self.llm.eval(prompt[kept:])
        return kept

    def prompt_logprobs(self, seq: list[int], k: int) -> list[dict[str, Any] | None]:
        """vLLM's prompt_logprobs: None, then per position the top-k ids with rank, plus the prompt's own token."""
        logits = self.forward(seq)
        out: list[dict[str, Any] | None] = [None]
        for i in range(1, len(seq)):
            lp = log_softmax(logits[i - 1])
            entry = {str(t): {"logprob": v, "rank": r + 1} for r, (t, v) in enumerate(top_entries(lp, k))}
            if str(seq[i]) not in entry:
                rank = int((lp > lp[seq[i]]).sum()) + 1
                entry[str(seq[i])] = {"logprob": float(lp[seq[i]]), "rank": rank}
            out.append(entry)
        return out

    def generate(self, prompt: list[int], body: dict[str, Any]):  # noqa: ANN201 (generator of step dicts)
        """Greedy steps: (token, its logprob, top-k logprobs, finish_reason or None)."""
        max_tokens = int(body.get("max_tokens") or 16)
        k = int(body.get("logprobs") or 0)
        bias = {int(t): float(b) for t, b in (body.get("logit_bias") or {}).items()}
        ignore_eos = bool(body.get("ignore_eos"))
        self.cached = self._prefill(prompt)
        n = len(prompt)
        for step in range(max_tokens):
            logits = np.array(self.llm.scores[n - 1], copy=True)
            lp = log_softmax(logits)  # reported logprobs are the model's, before the bias (vLLM's default)
            chosen = logits.astype(np.float64)
            for t, b in bias.items():
                chosen[t] += b
            token = int(np.argmax(chosen))
            stop = not ignore_eos and self.is_eog(token)
            last = step == max_tokens - 1 or n + 1 >= self.n_ctx
            finish = "stop" if stop else ("length" if last else None)
            yield token, float(lp[token]), top_entries(lp, k), finish
            if finish:
                return
            self.llm.eval([token])
            n += 1


def _logprobs(steps: list[tuple[int, float, list[tuple[int, float]], Any]], as_ids: bool, detok: Any) -> dict:
    def name(t: int) -> str:
        return f"token_id:{t}" if as_ids else detok(t)

    return {
        "tokens": [name(t) for t, _, _, _ in steps],
        "token_logprobs": [v for _, v, _, _ in steps],
        "top_logprobs": [{name(t2): v2 for t2, v2 in top} for _, _, top, _ in steps],
    }


def make_handler(engine: Engine, name: str, version: str) -> type[BaseHTTPRequestHandler]:
    def detok(token: int) -> str:
        return engine.llm.detokenize([token]).decode("utf-8", "replace")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # quiet: the caller keeps the log for failures
            pass

        def _send(self, code: int, doc: dict[str, Any]) -> None:
            data = json.dumps(doc).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            if self.path == "/health":
                self._send(200, {"status": "ok"})
            elif self.path == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": name, "object": "model", "owned_by": "llama.cpp"}]})
            elif self.path == "/version":
                self._send(200, {"version": version})
            else:
                self._send(404, {"error": f"no route {self.path}"})

        def do_POST(self) -> None:  # noqa: N802
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                if self.path == "/tokenize":
                    with engine.lock:
                        ids = engine.llm.tokenize(
                            str(body["content"]).encode(),
                            add_bos=bool(body.get("add_special")),
                            special=bool(body.get("parse_special")),
                        )
                    self._send(200, {"tokens": ids})
                elif self.path == "/v1/completions":
                    self._complete(body)
                else:
                    self._send(404, {"error": f"no route {self.path}"})
            except (KeyError, ValueError, TypeError) as exc:
                self._send(400, {"error": f"{type(exc).__name__}: {exc}"})

        def _complete(self, body: dict[str, Any]) -> None:
            if body.get("model") not in (None, name):
                self._send(404, {"error": f"model {body.get('model')!r} is not served"})
                return
            prompt = body.get("prompt")
            if not isinstance(prompt, list) or not prompt:
                raise ValueError("prompt must be a token-id list (or a list of them)")
            prompts = prompt if isinstance(prompt[0], list) else [prompt]
            prompts = [[int(t) for t in p] for p in prompts]
            if body.get("stream"):
                self._stream(prompts, body)
                return
            choices = []
            with engine.lock:
                for i, p in enumerate(prompts):
                    extra = {}  # prompt logprobs first: each pass starts from a cleared context
                    if body.get("prompt_logprobs") is not None:
                        extra["prompt_logprobs"] = engine.prompt_logprobs(p, int(body["prompt_logprobs"]))
                    steps = list(engine.generate(p, body)) if int(body.get("max_tokens") or 16) > 0 else []
                    choices.append({**self._choice(i, steps, body), **extra})
            self._send(200, {"object": "text_completion", "model": name, "choices": choices})

        def _choice(self, index: int, steps: list, body: dict[str, Any]) -> dict[str, Any]:
            as_ids = bool(body.get("return_tokens_as_token_ids"))
            return {
                "index": index,
                "text": "".join(detok(t) for t, *_ in steps),
                "finish_reason": steps[-1][3] if steps else "length",
                "logprobs": _logprobs(steps, as_ids, detok) if body.get("logprobs") else None,
            }

        def _stream(self, prompts: list[list[int]], body: dict[str, Any]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            cached = generated = 0
            with engine.lock:
                for i, p in enumerate(prompts):
                    for step in engine.generate(p, body):
                        generated += 1
                        choice = self._choice(i, [step], body)
                        self.wfile.write(f"data: {json.dumps({'choices': [choice]})}\n\n".encode())
                        self.wfile.flush()
                    cached += engine.cached
            if (body.get("stream_options") or {}).get("include_usage"):  # as vLLM: a last event with no choices
                prompt_tokens = sum(len(p) for p in prompts)
                usage = {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": generated,
                    "prompt_tokens_details": {"cached_tokens": cached},
                }
                self.wfile.write(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

    return Handler


def main() -> None:
    import llama_cpp

    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--n-ctx", type=int, default=2048)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--prompt-cache", action="store_true", help="reuse the previous sequence's shared prefix")
    args = parser.parse_args()
    engine = Engine(args.model, args.n_ctx, args.threads, args.prompt_cache)
    server = ThreadingHTTPServer(
        ("127.0.0.1", args.port), make_handler(engine, args.name, f"llama-cpp-python {llama_cpp.__version__}")
    )
    print(f"serving {args.model} as {args.name} on 127.0.0.1:{args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
