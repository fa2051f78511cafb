"""`validate --load`: the golden suite replayed the way production sends it, every response judged like one request.

The replay runs on an endpoint (the engine's scheduler batches what arrives together), through the one OpenAI client,
from a thread pool: at each concurrency level (1, 8, 32 by default) the golden prompts are sent until the level is
full. Prompts repeat, so the engine's prefix cache is hit: at level 1 half the prompts are sent twice (a cold miss,
then a hit, with nothing else in flight); the other half arrive cold first at the next level, beside requests that
hit. So a fault that only appears with other requests in flight and one that only appears on cache hits fail
different conditions, and the check names the one that explains the failures.

Each response is a greedy generation run to the goldens' length: its tokens against the goldens' (near-tie aware,
as greedy_parity), its per-step distributions against the goldens' rows with the comparator (pooled per condition).
Prompt logprobs are not used here: vLLM skips the prefix cache for requests that ask for them. Conditions:
concurrency level, prefix-cache hit or miss (the engine's cached-token count per response), chunked or whole
prefill (prompts past --prefill-chunk). Preemption is not observable per request through the API: the engine's
preemption counter (vLLM /metrics) over the replay says whether it ran under preemption (load_checks:
preemption_under_load); a small KV cache (vLLM --num-gpu-blocks-override, validate --engine vllm --kv-blocks) forces it.

A request whose connection fails (engine killed, restarting) is retried with backoff until `recovery_timeout_s`, then
the run ends with EndpointLost naming how many requests were answered; each request is recorded once, by its id.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from onboard.comparator import Tolerances, compare_rows, judge, quantile
from onboard.validate_serving.candidates import Generation
from onboard.validate_serving.checks import loop_of
from onboard.validate_serving.golden import GoldenPrompt, GoldenSet
from onboard.validate_serving.openai_client import EndpointError, HTTPStatusError
from onboard.validate_serving.parity import _greedy_one

DEFAULT_LEVELS = (1, 8, 32)
RECOVERY_TIMEOUT_S = 120.0
BACKOFF_S = (0.5, 8.0)  # first and largest wait between retries of one request


class EndpointLost(EndpointError):
    """The endpoint stopped answering mid-replay and did not come back within the recovery timeout."""


@dataclass(frozen=True)
class LoadConfig:
    levels: tuple[int, ...] = DEFAULT_LEVELS
    recovery_timeout_s: float = RECOVERY_TIMEOUT_S
    prefill_chunk: int | None = None
    """The engine's prefill chunk (vLLM --max-num-batched-tokens): longer prompts are the chunked-prefill condition;
    None: not known, the condition is not formed."""
    bitwise: bool = False
    """The engine runs a batch-invariant mode (VLLM_BATCH_INVARIANT=1): the same prompt must be bitwise identical at
    every concurrency level, not only within the dtype's noise."""
    small_kv: bool = False
    """The engine was started with a deliberately small KV cache (validate --kv-blocks): preemption is expected, and
    a replay without any is reported as not exercised."""


@dataclass(frozen=True)
class Request:
    id: int
    prompt: GoldenPrompt
    level: int


@dataclass(frozen=True)
class Reply:
    """One request's answer, recorded once."""

    request: Request
    generation: Generation
    cached_tokens: int | None
    """Prompt tokens the engine took from its prefix cache (None: the engine does not report it)."""
    attempts: int
    seconds: float
    """Send of the answered attempt to its last token."""

    @property
    def ttft_s(self) -> float | None:
        return self.generation.times[0] if self.generation.times else None

    @property
    def conditions(self) -> tuple[str, ...]:
        out = [f"concurrency {self.request.level}"]
        if self.cached_tokens is not None:
            out.append("prefix-cache hit" if self.cached_tokens > 0 else "prefix-cache miss")
        return tuple(out)


@dataclass(frozen=True)
class Judged:
    reply: Reply
    problems: tuple[str, ...]
    """What is wrong with this response on its own: a greedy divergence beyond a near-tie, an empty or truncated
    output, a wrong finish_reason, a loop the reference lacks."""
    metrics: tuple[Any, ...]
    """Comparator metrics of its generated positions (up to a divergence) against the goldens' rows."""


@dataclass(frozen=True)
class ConditionResult:
    name: str
    requests: int
    failed_requests: int
    passed: bool
    reasons: tuple[str, ...]
    ttft_p50_ms: float | None = None
    ttft_p99_ms: float | None = None
    itl_p50_ms: float | None = None
    itl_p99_ms: float | None = None
    tokens_per_s: float | None = None


@dataclass(frozen=True)
class LoadResult:
    conditions: tuple[ConditionResult, ...]
    causes: tuple[str, ...]
    """The conditions that explain the failures (all failures inside them, none outside)."""
    requests: int
    retried: tuple[int, ...]
    """Ids of the requests that needed more than one attempt (the engine failed while they were in flight)."""
    cache: dict[str, Any] = field(default_factory=dict)
    batch: dict[str, Any] = field(default_factory=dict)
    hit_vs_miss: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0
    client_s: float = 0.0
    """Client-side time: decoding events (in the requests' time) is not separable; judging and bookkeeping is."""

    @property
    def passed(self) -> bool:
        return (
            all(c.passed for c in self.conditions)
            and self.hit_vs_miss.get("passed", True)
            and self.batch.get("passed", True)
        )


# --- the workload ------------------------------------------------------------------------------------------------
def plan(golden: GoldenSet, levels: Sequence[int]) -> list[Request]:
    """The requests in send order: level by level; at level 1 each of the warm half twice in a row (an engine that
    caches only the last sequence, as llama.cpp's single slot, hits too), then every level filled (at least
    every prompt once from the second level on), cold prompts first so they reach the engine before their repeats."""
    prompts = list(golden.prompts)
    warm, cold = prompts[0::2], prompts[1::2]
    out: list[Request] = []
    for n, level in enumerate(levels):
        if n == 0:
            batch = [p for p in warm for _ in (0, 1)] if level == 1 else prompts  # each repeat right after its miss
        else:
            batch = cold + warm if n == 1 else list(prompts)
        while len(batch) < level:
            batch += prompts[: level - len(batch)]
        out += [Request(len(out) + i, p, level) for i, p in enumerate(batch)]
    return out


def replay(
    candidate: Any, golden: GoldenSet, tol: Tolerances, top_k: int, config: LoadConfig = LoadConfig()
) -> LoadResult:
    """Replay the goldens on `candidate` (an EndpointCandidate) at each level and judge every response."""
    requests = plan(golden, config.levels)
    before = _counters(candidate)
    start = time.perf_counter()
    replies: dict[int, Reply] = {}
    for level in config.levels:
        batch = [r for r in requests if r.level == level]
        sent = _send_level(candidate, batch, level, top_k, config.recovery_timeout_s, (len(replies), len(requests)))
        for reply in sent:
            if reply.request.id in replies:
                raise AssertionError(f"request {reply.request.id} answered twice")  # a bug in the pool, not input
            replies[reply.request.id] = reply
    wall = time.perf_counter() - start
    judging = time.perf_counter()  # client-side work after the engine answered: judging and bookkeeping
    missing = [r.id for r in requests if r.id not in replies]
    if missing:
        raise AssertionError(f"requests {missing[:5]} never answered")  # _send_level raises before this
    judged = [_judge_reply(replies[r.id], tol) for r in requests]
    conditions = _conditions(judged, tol, config)
    after = _counters(candidate)
    return LoadResult(
        conditions=conditions,
        causes=_causes(conditions),
        requests=len(requests),
        retried=tuple(r.request.id for r in replies.values() if r.attempts > 1),
        cache=_cache_figures(judged, before, after),
        batch=_batch_spread(judged, tol, config.bitwise),
        hit_vs_miss=_hit_vs_miss(judged, tol),
        wall_s=wall,
        client_s=time.perf_counter() - judging,
    )


def _send_level(
    candidate: Any, batch: list[Request], level: int, top_k: int, timeout_s: float, progress: tuple[int, int]
) -> list[Reply]:
    """Every request of one level through a pool of `level` threads; the first EndpointLost ends the replay."""
    done_before, total = progress
    with ThreadPoolExecutor(max_workers=level) as pool:
        futures = [pool.submit(_send, candidate, r, top_k, timeout_s) for r in batch]
        finished, _ = wait(futures, return_when=FIRST_EXCEPTION)
        lost = next((f.exception() for f in finished if f.exception() is not None), None)
        if lost is not None:
            for f in futures:
                f.cancel()
            answered = done_before + sum(1 for f in futures if f.done() and not f.cancelled() and not f.exception())
            if isinstance(lost, EndpointLost):
                raise EndpointLost(f"{lost.message}; {answered} of {total} requests answered", lost.hint) from lost
            raise lost
        return [f.result() for f in futures]


def _send(candidate: Any, request: Request, top_k: int, timeout_s: float) -> Reply:
    """One request, retried with backoff while the endpoint fails to answer (refused, cut, timed out) until
    `timeout_s` after its first failure; HTTP 4xx answers are the request's own fault and raise at once."""
    attempts, wait_s, failing_since = 0, BACKOFF_S[0], None
    n = len(request.prompt.generated_ids)
    while True:
        attempts += 1
        sent = time.perf_counter()
        try:
            generation, usage = candidate.generate_with_usage(request.prompt.prompt_ids, n, top_k)
        except EndpointError as exc:
            if isinstance(exc, HTTPStatusError) and 400 <= exc.code < 500 and exc.code not in (408, 429):
                raise
            failing_since = failing_since or time.monotonic()
            if time.monotonic() - failing_since > timeout_s:
                raise EndpointLost(
                    f"{candidate.base}: no answer for {timeout_s:g} s after the engine failed mid-replay ({exc.message})",
                    "restart the engine, or raise --recovery-timeout",
                ) from exc
            time.sleep(wait_s)
            wait_s = min(wait_s * 2, BACKOFF_S[1])
            continue
        return Reply(request, generation, _cached(usage), attempts, time.perf_counter() - sent)


def _cached(usage: dict[str, Any] | None) -> int | None:
    details = (usage or {}).get("prompt_tokens_details") or {}
    value = details.get("cached_tokens")
    return int(value) if isinstance(value, int) else None


# --- judging -----------------------------------------------------------------------------------------------------
def _judge_reply(reply: Reply, tol: Tolerances) -> Judged:
    prompt, gen = reply.request.prompt, reply.generation
    greedy = _greedy_one(prompt, gen, tol)
    problems = []
    if greedy.diverged_at is not None and not greedy.near_tie:
        problems.append(greedy.detail)
    if not gen.ids:
        problems.append(f"{prompt.name}: empty output")
    elif gen.finish_reason not in ("length", "stop"):
        problems.append(f"{prompt.name}: finish_reason {gen.finish_reason!r} (expected 'length')")
    loop, ref_loop = loop_of(gen.ids), loop_of(prompt.generated_ids)
    if loop and not ref_loop:
        problems.append(f"{prompt.name}: {loop[0]}-gram repeated {loop[1]}x at the end (the reference does not loop)")
    n = greedy.diverged_at if greedy.diverged_at is not None else len(gen.steps)
    start = len(prompt.prompt_ids) - 1
    metrics = compare_rows(prompt.rows[start : start + n], gen.steps[:n], prompt.generated_ids[:n], prompt.name)
    return Judged(reply, tuple(problems), tuple(metrics))


def _conditions(judged: list[Judged], tol: Tolerances, config: LoadConfig) -> tuple[ConditionResult, ...]:
    groups: dict[str, list[Judged]] = {}
    for j in judged:
        names = list(j.reply.conditions)
        if config.prefill_chunk:
            chunked = len(j.reply.request.prompt.prompt_ids) > config.prefill_chunk
            names.append("chunked prefill" if chunked else "whole prefill")
        for name in names:
            groups.setdefault(name, []).append(j)
    return tuple(_condition(name, members, tol) for name, members in groups.items())


def _condition(name: str, members: list[Judged], tol: Tolerances) -> ConditionResult:
    bad = [j for j in members if j.problems]
    verdict = judge([m for j in members for m in j.metrics], tol)
    reasons = [p for j in bad for p in j.problems][:3]
    if not verdict.passed:
        reasons.append("distributions: " + "; ".join(verdict.reasons))
    ttft = [j.reply.ttft_s * 1e3 for j in members if j.reply.ttft_s is not None]
    itl = [(b - a) * 1e3 for j in members for a, b in zip(j.reply.generation.times, j.reply.generation.times[1:])]
    tokens = sum(len(j.reply.generation.ids) for j in members)
    busy = sum(j.reply.seconds for j in members)
    return ConditionResult(
        name,
        len(members),
        len(bad) + (0 if verdict.passed else len(members) - len(bad)),
        not bad and verdict.passed,
        tuple(reasons),
        _q(ttft, 0.5),
        _q(ttft, 0.99),
        _q(itl, 0.5),
        _q(itl, 0.99),
        round(tokens / busy * len(members), 1) if busy > 0 else None,
    )


def _q(values: list[float], q: float) -> float | None:
    return round(quantile(values, q), 3) if values else None


def _causes(conditions: Sequence[ConditionResult]) -> tuple[str, ...]:
    """A factor explains the failures when its baseline condition passes and another of its conditions fails:
    concurrency (level 1 passes, a higher one fails), the prefix cache (misses pass, hits fail), chunked prefill."""
    by = {c.name: c for c in conditions}
    out = []
    levels = sorted(int(n.split()[-1]) for n in by if n.startswith("concurrency "))
    if levels and levels[0] == 1 and by["concurrency 1"].passed:
        failing = [f"concurrency {n}" for n in levels[1:] if not by[f"concurrency {n}"].passed]
        if failing:
            out.append(f"concurrency (passes alone, fails at {', '.join(failing)})")
    if (
        "prefix-cache miss" in by
        and by["prefix-cache miss"].passed
        and not by.get("prefix-cache hit", by["prefix-cache miss"]).passed
    ):
        out.append("prefix cache (cold prompts pass, prompts served from the prefix cache fail)")
    if (
        "whole prefill" in by
        and by["whole prefill"].passed
        and not by.get("chunked prefill", by["whole prefill"]).passed
    ):
        out.append("chunked prefill (prompts within one chunk pass, longer ones fail)")
    return tuple(out)


def _spread(a: Generation, b: Generation) -> float:
    if a.steps == b.steps:
        return 0.0
    return max((m.max_logprob_error for m in compare_rows(a.steps, b.steps)), default=0.0)


def _batch_spread(judged: list[Judged], tol: Tolerances, bitwise: bool) -> dict[str, Any]:
    """The same prompt at every concurrency level and batch position: the largest logprob spread from its first
    answer (alone, at the first level), judged against the dtype's noise (bitwise when the engine promises it)."""
    first: dict[str, Judged] = {}
    worst, where = 0.0, None
    for j in judged:
        name = j.reply.request.prompt.name
        if name not in first:
            first[name] = j
            continue
        a, b = first[name].reply.generation, j.reply.generation
        if a.ids[:1] != b.ids[:1]:
            continue  # a first-token difference is a greedy divergence, judged above
        spread = _spread(a, b)
        if spread > worst:
            worst, where = spread, f"{name} at concurrency {j.reply.request.level} (request {j.reply.request.id})"
    limit = 0.0 if bitwise else tol.max_logprob_error
    return {
        "max_spread": worst,
        "limit": limit,
        "bitwise": worst == 0.0,
        "where": where,
        "passed": worst <= limit,
    }


def _hit_vs_miss(judged: list[Judged], tol: Tolerances) -> dict[str, Any]:
    """Per prompt answered both cold and from the prefix cache: the two answers agree within the comparator."""
    miss: dict[str, Generation] = {}
    hit: dict[str, list[Generation]] = {}
    for j in judged:
        name, cached = j.reply.request.prompt.name, j.reply.cached_tokens
        if cached == 0:
            miss.setdefault(name, j.reply.generation)
        elif cached:
            hit.setdefault(name, []).append(j.reply.generation)
    pairs = [(name, miss[name], g) for name in miss for g in hit.get(name, [])]
    if not pairs:
        return {"pairs": 0}
    metrics, tokens_differ = [], []
    for name, a, b in pairs:
        if a.ids != b.ids:
            tokens_differ.append(name)
        n = min(len(a.steps), len(b.steps))
        metrics += compare_rows(a.steps[:n], b.steps[:n], a.ids[:n], name)
    verdict = judge(metrics, tol)
    return {
        "pairs": len(pairs),
        "passed": verdict.passed and not tokens_differ,
        "max_logprob_error": verdict.max_logprob_error,
        "tokens_differ": sorted(set(tokens_differ)),
        "reasons": list(verdict.reasons),
    }


# --- the engine's counters ---------------------------------------------------------------------------------------
COUNTERS = {
    "prefix_cache_queries": "vllm:prefix_cache_queries_total",
    "prefix_cache_hits": "vllm:prefix_cache_hits_total",
    "preemptions": "vllm:num_preemptions_total",
}


def _counters(candidate: Any) -> dict[str, float]:
    text = candidate.client.metrics() if hasattr(candidate, "client") else None
    return parse_counters(text or "")


def parse_counters(text: str) -> dict[str, float]:
    """Sums of the COUNTERS series (over their labels) in Prometheus text."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        for key, metric in COUNTERS.items():
            if line.startswith(metric + "{") or line.startswith(metric + " "):
                out[key] = out.get(key, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


def _cache_figures(judged: list[Judged], before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    cached = [j.reply.cached_tokens for j in judged if j.reply.cached_tokens is not None]
    ttft_hit = [j.reply.ttft_s * 1e3 for j in judged if j.reply.cached_tokens and j.reply.ttft_s is not None]
    ttft_miss = [j.reply.ttft_s * 1e3 for j in judged if j.reply.cached_tokens == 0 and j.reply.ttft_s is not None]
    delta = {k: after[k] - before.get(k, 0.0) for k in after}
    queries = delta.get("prefix_cache_queries")
    return {
        "responses_with_hits": sum(1 for c in cached if c > 0),
        "responses_reporting": len(cached),
        "cached_tokens": sum(cached),
        "engine_hit_rate": (delta["prefix_cache_hits"] / queries) if queries else None,
        "engine_counters": delta,
        "ttft_hit_p50_ms": _q(ttft_hit, 0.5),
        "ttft_miss_p50_ms": _q(ttft_miss, 0.5),
    }
