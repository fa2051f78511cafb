"""An OpenAI-compatible endpoint as a candidate (vLLM, SGLang, TGI, ...): `/v1/completions` with token-id prompts.

What the engine supports is probed once (token-id prompts and logprobs are required; prompt_logprobs or echo,
ids-as-tokens, ignore_eos and logit_bias are optional) and recorded in Capabilities, so checks that depend on a
missing feature are reported as not checked. Every transport problem (refused, timeout, HTTP error, truncated or
malformed body) becomes an EndpointError naming the URL and what to do; never a traceback. The transport (the
`openai` package: retries honouring Retry-After, timeouts, streaming) is in openai_client.py.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlparse

from onboard.environment import hardware
from onboard.validate_serving.candidates import (
    Candidate,
    CandidateInfo,
    Capabilities,
    Generation,
    TopK,
    run_concurrently,
)
from onboard.validate_serving.openai_client import DEFAULT_RETRIES, EndpointError, HTTPStatusError, OpenAIClient

__all__ = ["EndpointCandidate", "EndpointError"]

FORCE_BIAS = 100.0  # logit_bias that makes a token win (OpenAI caps bias at 100)
PROBE_IDS = [1, 2, 3, 4]


class EndpointCandidate(Candidate):
    def __init__(
        self, url: str, served_model: str, dtype: str, *, timeout_s: float = 60.0, retries: int = DEFAULT_RETRIES
    ) -> None:
        self.base = url.rstrip("/").removesuffix("/v1")
        self.model = served_model
        self.client = OpenAIClient(self.base, timeout_s, retries)
        try:
            models = self.client.models()
        except HTTPStatusError as exc:
            raise EndpointError(str(exc), "is this an OpenAI-compatible server? (GET /v1/models failed)") from exc
        if served_model not in models:
            raise EndpointError(
                f"{self.base}: model {served_model!r} is not served (serving: {', '.join(models) or 'nothing'})",
                "pass --served-model with one of the served names",
            )
        version = self.client.version()
        host = urlparse(self.base).hostname or ""
        local = host in ("127.0.0.1", "localhost", "::1")
        self.info = CandidateInfo(
            served_model,
            "endpoint",
            dtype,
            {"engine": str(version or "unknown"), "endpoint": self.base},
            hardware() if local else {"endpoint": self.base, "note": "remote: hardware not reported by the API"},
        )
        self.capabilities = self._probe()
        self._usage_kw: bool | None = None  # does the engine take stream_options (asked on first use)

    def _complete(self, body: dict[str, Any]) -> dict[str, Any]:
        choices = self.client.complete({"model": self.model, "temperature": 0.0, **body}).choices
        if not choices:
            raise EndpointError(
                f"{self.base}/v1/completions: response has no choices",
                "is this an OpenAI-compatible completions endpoint?",
            )
        return {"choices": choices}

    # --- capability probe ------------------------------------------------------------------------------------------
    def _probe(self) -> Capabilities:
        notes = []
        base = {"prompt": PROBE_IDS, "max_tokens": 1, "logprobs": 2}
        try:
            doc = self._complete(base)
        except HTTPStatusError as exc:
            raise EndpointError(
                f"the engine rejects token-id prompts with logprobs ({exc})",
                "validation needs /v1/completions with a token-id prompt and logprobs",
            ) from exc
        if not (doc["choices"][0].get("logprobs") or {}).get("top_logprobs"):
            raise EndpointError(f"{self.base}: the engine returns no top_logprobs", "enable logprobs on the server")
        self._ids_kw = self._accepts({**base, "return_tokens_as_token_ids": True}, lambda d: _ids_in(d))
        if not self._ids_kw:
            notes.append("tokens are not returned as ids (return_tokens_as_token_ids): greedy tokens compared by text")
        prompt_lp = self._accepts(
            {**base, "prompt_logprobs": 2}, lambda d: bool(d["choices"][0].get("prompt_logprobs"))
        )
        echo = False
        if not prompt_lp:
            echo = self._accepts(
                {**base, "echo": True, "max_tokens": 0},
                lambda d: len(d["choices"][0]["logprobs"].get("top_logprobs") or []) >= len(PROBE_IDS) - 1,
            )
            notes.append(
                "no prompt_logprobs: " + ("using echo+logprobs" if echo else "prompt positions cannot be checked")
            )
        self._echo = echo
        ignore_eos = self._accepts({**base, "ignore_eos": True}, lambda d: True)
        bias = self._accepts(
            {**base, "logit_bias": {"5": FORCE_BIAS}, "return_tokens_as_token_ids": self._ids_kw},
            lambda d: _first_id(d) == 5,
        )
        if not bias:
            notes.append("logit_bias not honoured: stop tokens cannot be forced")
        # padding: the engine batches prompts of different lengths (one request with several, or concurrent ones);
        # how it pads or packs them is internal, and exactly what determinism_padding observes from outside.
        return Capabilities(
            prompt_logprobs=prompt_lp or echo,
            concurrent=True,
            force_token=bias,
            ignore_eos=ignore_eos,
            notes=tuple(notes),
        )

    def _accepts(self, body: dict[str, Any], works: Any) -> bool:
        try:
            return bool(works(self._complete(body)))
        except (HTTPStatusError, KeyError, TypeError, IndexError, ValueError):
            return False

    # --- Candidate interface ---------------------------------------------------------------------------------------
    def score(self, sequences: Sequence[Sequence[int]], top_k: int, padding: str = "right") -> list[list[TopK]]:
        """One request for all sequences (the engine batches them), teacher-forced prompt logprobs."""
        prompts = [list(s) for s in sequences]
        body: dict[str, Any] = {"prompt": _prompt(prompts), "max_tokens": 1, "logprobs": 1}
        if self._echo:
            body.update(echo=True, max_tokens=0, logprobs=top_k)
        else:
            body["prompt_logprobs"] = top_k
        doc = self._complete(body)
        by_index = {c.get("index", i): c for i, c in enumerate(doc["choices"])}
        out = []
        for i, seq in enumerate(prompts):
            choice = by_index.get(i)
            if choice is None:
                raise EndpointError(
                    f"{self.base}/v1/completions: no choice {i} for a batch of {len(prompts)}", "check the server log"
                )
            rows = self._echo_rows(choice, seq, top_k) if self._echo else _prompt_rows(choice, seq, top_k, self.base)
            _require_top_k(rows, top_k, f"{self.base}/v1/completions (sequence {i})")
            out.append(rows)
        return out

    def _echo_rows(self, choice: dict[str, Any], seq: list[int], top_k: int) -> list[TopK]:
        lp = choice.get("logprobs") or {}
        tops, toks = lp.get("top_logprobs") or [], lp.get("token_logprobs") or []
        rows = []
        for j in range(1, len(seq)):
            entry = tops[j] if j < len(tops) and tops[j] else {}
            ids, lps = _sorted_ids(entry)
            rows.append(TopK(ids[:top_k], lps[:top_k], toks[j] if j < len(toks) else None))
        return rows

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        max_new_tokens: int,
        top_k: int,
        *,
        ignore_eos: bool = True,
        force_first: int | None = None,
    ) -> list[Generation]:
        """Streamed greedy generation, all prompts in one request; token arrival times (taken as each event is
        decoded) feed the performance figures."""
        body = self._generation_body(prompts, max_new_tokens, top_k, ignore_eos)
        if force_first is not None:
            body["logit_bias"] = {str(force_first): FORCE_BIAS}
        return self._streamed(body, len(prompts))[0]

    def _generation_body(
        self, prompts: Sequence[Sequence[int]], max_new_tokens: int, top_k: int, ignore_eos: bool
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"prompt": _prompt(prompts), "max_tokens": max_new_tokens, "logprobs": max(1, top_k)}
        if self._ids_kw:
            body["return_tokens_as_token_ids"] = True
        if ignore_eos and self.capabilities.ignore_eos:
            body["ignore_eos"] = True
        return body

    def generate_with_usage(
        self, prompt: Sequence[int], max_new_tokens: int, top_k: int
    ) -> tuple[Generation, dict[str, Any] | None]:
        """One streamed greedy generation run to length, with the engine's usage (cached prompt tokens) when it
        reports it (`stream_options.include_usage`; an engine that refuses the option is asked without it)."""
        body = self._generation_body([prompt], max_new_tokens, top_k, True)
        if self._usage_kw is not False:
            try:
                gens, usage = self._streamed({**body, "stream_options": {"include_usage": True}}, 1)
                self._usage_kw = True
                return gens[0], usage
            except HTTPStatusError as exc:
                if self._usage_kw or not 400 <= exc.code < 500:
                    raise
                self._usage_kw = False
        return self._streamed(body, 1)[0][0], None

    def _streamed(self, body: dict[str, Any], n: int) -> tuple[list[Generation], dict[str, Any] | None]:
        start = time.perf_counter()
        acc: list[dict[str, Any]] = [{"ids": [], "steps": [], "times": [], "finish": None} for _ in range(n)]
        usage = None
        for event in self.client.stream({"model": self.model, "temperature": 0.0, **body}):
            now = time.perf_counter() - start
            usage = event.usage or usage
            for choice in event.choices:
                _absorb(acc[int(choice.get("index", 0)) % n], choice, now)
        gens = [Generation(tuple(a["ids"]), tuple(a["steps"]), a["finish"], tuple(a["times"])) for a in acc]
        return gens, usage

    def timed_batch(self, prompts: Sequence[Sequence[int]], max_new_tokens: int) -> tuple[int, float]:
        """N concurrent requests (the engine batches them): (output tokens, wall seconds first send → last token)."""
        start = time.perf_counter()
        results = run_concurrently([lambda p=p: self.generate([p], max_new_tokens, 1)[0] for p in prompts])
        return sum(len(g.ids) for g in results), time.perf_counter() - start

    def peak_memory(self) -> tuple[int | None, str]:
        return None, "not observable through the OpenAI API"


def _prompt(prompts: Sequence[Sequence[int]]) -> list[int] | list[list[int]]:
    """The request's `prompt`: one token-id list, or a list of them (the engine batches them)."""
    return [list(p) for p in prompts] if len(prompts) > 1 else list(prompts[0])


def _token_id(key: str) -> int | None:
    text = key.removeprefix("token_id:")
    return int(text) if text.lstrip("-").isdigit() else None


def _sorted_ids(entry: dict[str, Any]) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """A top_logprobs entry as (ids, logprobs), best first; keys that are not token ids are left out."""
    ids = {k: _token_id(k) for k in entry}
    pairs = sorted(((ids[k], float(v)) for k, v in entry.items() if ids[k] is not None), key=lambda p: -p[1])
    return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)  # type: ignore[misc]


def _ids_in(doc: dict[str, Any]) -> bool:
    tokens = doc["choices"][0]["logprobs"]["tokens"]
    return bool(tokens) and all(str(t).startswith("token_id:") for t in tokens)


def _first_id(doc: dict[str, Any]) -> int | None:
    tokens = doc["choices"][0]["logprobs"]["tokens"]
    return _token_id(str(tokens[0])) if tokens else None


def _require_top_k(rows: Sequence[TopK], top_k: int, where: str) -> None:
    """Every scored position needs the engine's top-k: without it nothing can be compared there (the comparator would
    fail on an empty row), so the answer is malformed, named here rather than as a crash downstream."""
    if top_k <= 0:
        return
    missing = [j + 1 for j, row in enumerate(rows) if not row.ids]
    if missing:
        raise EndpointError(
            f"{where}: no top-{top_k} logprobs at {len(missing)} of {len(rows)} scored positions (first: position "
            f"{missing[0]})",
            "check that the engine returns logprobs for every prompt position, and its server log",
        )


def _prompt_rows(choice: dict[str, Any], seq: list[int], top_k: int, base: str) -> list[TopK]:
    """vLLM prompt_logprobs: [None, {id: {logprob, rank}}, ...]; entry i is the distribution that predicted seq[i]."""
    entries = choice.get("prompt_logprobs")
    if not isinstance(entries, list) or len(entries) != len(seq):
        raise EndpointError(
            f"{base}/v1/completions: prompt_logprobs has {len(entries) if isinstance(entries, list) else 'no'} "
            f"entries for a prompt of {len(seq)} tokens",
            "check the server log",
        )
    rows = []
    for i in range(1, len(seq)):
        entry = entries[i] or {}
        try:
            ranked = sorted(
                ((int(k), float(v["logprob"]), int(v.get("rank") or 0)) for k, v in entry.items()), key=lambda t: -t[1]
            )
        except (TypeError, ValueError, KeyError) as exc:
            raise EndpointError(
                f"{base}/v1/completions: malformed prompt_logprobs entry {i}", "check the server log"
            ) from exc
        token_lp = next((lp for tid, lp, _ in ranked if tid == seq[i]), None)
        top = [(tid, lp) for tid, lp, rank in ranked if rank <= top_k][:top_k]
        rows.append(TopK(tuple(t for t, _ in top), tuple(lp for _, lp in top), token_lp))
    return rows


def _absorb(acc: dict[str, Any], choice: dict[str, Any], now: float) -> None:
    """One streamed chunk: append its tokens (a chunk may carry several: its arrival time counts once per token)."""
    lp = choice.get("logprobs") or {}
    tokens = lp.get("tokens") or []
    tops = lp.get("top_logprobs") or [{} for _ in tokens]
    token_lps = lp.get("token_logprobs") or [None for _ in tokens]
    for tok, top, tlp in zip(tokens, tops, token_lps):
        tid = _token_id(str(tok))
        ids, lps = _sorted_ids(top or {})
        acc["ids"].append(tid if tid is not None else -1)
        acc["steps"].append(TopK(ids, lps, tlp))
        acc["times"].append(now)
    if choice.get("finish_reason"):
        acc["finish"] = choice["finish_reason"]
