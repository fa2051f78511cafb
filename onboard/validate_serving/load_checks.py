"""The load replay's verdicts as validate checks (load.py runs it), and `validate --load`'s entry point.

- serving_under_load (required): every condition (concurrency level, prefix-cache hit/miss, chunked/whole prefill)
  within the goldens' tolerance, no degenerate response, answers with and without cache hits equal, nothing lost;
  the detail names the failing conditions and the factor that explains them.
- prefix_cache_hits (information): the engine's hit rate where prompts repeat, TTFT with and without hits; a rate of
  0 is a finding.
- preemption_under_load (information): how often the engine preempted requests during the replay (vLLM's counter),
  every response judged all the same; none where a small KV cache was asked for is "not exercised", no counter is
  "not observable", each naming what would exercise it.
- batch_invariance_load (required): the same prompt's spread across levels and batch positions against the dtype's
  noise; bitwise only where the engine promises a batch-invariant mode (--batch-invariant), else that part is a
  skip naming what would check it.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from onboard.checks import Check, skipped
from onboard.comparator import tolerances
from onboard.validate_serving.golden import GoldenSet
from onboard.validate_serving.load import LoadConfig, LoadResult, replay

BITWISE_HINT = (
    "not checked: bitwise batch invariance needs an engine in a batch-invariant mode (vLLM with "
    "VLLM_BATCH_INVARIANT=1, which needs a GPU); validate --load --batch-invariant against such an endpoint checks it"
)


def add_load_checks(result: dict[str, Any], golden: GoldenSet, candidate: Any, config: LoadConfig) -> None:
    """Replay the goldens under load on `candidate` and add the checks (and `load` figures) to a validate result."""
    from onboard.validate_serving.report import add_checks, json_safe

    if not hasattr(candidate, "generate_with_usage"):
        add_checks(
            result,
            [
                skipped(
                    "serving_under_load",
                    "not checked: the load replay runs on a serving engine; validate --endpoint URL --load (or "
                    "--engine vllm --load) checks it",
                )
            ],
        )
        return
    from onboard.validate_serving.run import MAX_CANDIDATE_TOP_K

    tol = tolerances(candidate.info.dtype, golden.noise(candidate.info.dtype))
    load = replay(candidate, golden, tol, min(MAX_CANDIDATE_TOP_K, 2 * golden.top_k), config)
    result["load"] = json_safe(asdict(load) | {"levels": list(config.levels)})
    add_checks(result, load_checks(load, config))


def load_checks(load: LoadResult, config: LoadConfig) -> list[Check]:
    return [_serving(load, config), _prefix_cache(load), _preemption(load, config), *_batch(load, config)]


def _preemption(load: LoadResult, config: LoadConfig) -> Check:
    count = (load.cache.get("engine_counters") or {}).get("preemptions")
    force = (
        "start the engine with a small KV cache (vLLM --num-gpu-blocks-override N; validate --engine vllm --load "
        "--kv-blocks N) so concurrent requests outgrow it"
    )
    if count is None:
        return skipped(
            "preemption_under_load",
            f"not observable: the engine exports no preemption counter (vLLM's vllm:num_preemptions_total); {force}",
        )
    if count == 0:
        why = "a small KV cache was asked for, but " if config.small_kv else ""
        return skipped(
            "preemption_under_load",
            f"not exercised: {why}the engine preempted no request during the replay; "
            + ("lower --kv-blocks or raise --load-levels" if config.small_kv else force),
        )
    verdict = "every response within the goldens' tolerance" if load.passed else "see serving_under_load's failures"
    return Check(
        "preemption_under_load",
        load.passed,
        False,
        f"{count:.0f} preemptions during the replay of {load.requests} requests: {verdict}",
        data={"preemptions": count},
    )


def _serving(load: LoadResult, config: LoadConfig) -> Check:
    failed = [c for c in load.conditions if not c.passed]
    levels = ", ".join(str(n) for n in config.levels)
    retried = f"; {len(load.retried)} requests retried after the engine failed mid-run" if load.retried else ""
    hm = load.hit_vs_miss
    if failed or not load.passed:
        parts = [f"{c.name} ({c.failed_requests} of {c.requests} requests): {'; '.join(c.reasons)}" for c in failed]
        if hm.get("pairs") and not hm["passed"]:
            parts.append(
                f"prefix-cache hits differ from misses ({', '.join(hm['tokens_differ']) or 'distributions'}: "
                + "; ".join(hm["reasons"] or ["greedy tokens differ"])
                + ")"
            )
        if not load.batch.get("passed", True):
            parts.append(f"batch spread {load.batch['max_spread']:.3g} > {load.batch['limit']:.3g}")
        cause = f"caused by {'; '.join(load.causes)}: " if load.causes else ""
        return Check("serving_under_load", False, True, f"{cause}failed under " + " | ".join(parts), data=_data(load))
    names = ", ".join(c.name for c in load.conditions)
    pairs = f"; {hm['pairs']} hit/miss pairs agree" if hm.get("pairs") else ""
    detail = (
        f"{load.requests} requests at concurrency {levels}: every condition within the goldens' tolerance "
        f"({names}){pairs}{retried}"
    )
    return Check("serving_under_load", True, True, detail, data=_data(load))


def _data(load: LoadResult) -> dict[str, Any]:
    return {
        "conditions": [asdict(c) for c in load.conditions],
        "causes": list(load.causes),
        "requests": load.requests,
        "retried": list(load.retried),
    }


def _prefix_cache(load: LoadResult) -> Check:
    cache = load.cache
    rate, reporting = cache.get("engine_hit_rate"), cache.get("responses_reporting", 0)
    if rate is None and not reporting:
        return skipped(
            "prefix_cache_hits",
            "not checked: the engine reports neither prefix-cache counters (/metrics) nor cached tokens per response; "
            "vLLM with --enable-prompt-tokens-details reports both",
        )
    hits = cache.get("responses_with_hits", 0)
    ttft = f"; TTFT p50 {_ms(cache.get('ttft_hit_p50_ms'))} with hits, {_ms(cache.get('ttft_miss_p50_ms'))} without"
    shown = f"engine hit rate {rate:.1%}" if rate is not None else "engine hit rate not exported"
    detail = f"{shown}; {hits} of {reporting} responses served partly from the prefix cache{ttft}"
    if (rate or 0) == 0 and hits == 0:
        return Check(
            "prefix_cache_hits", False, False, f"finding: prompts repeat but nothing hit: {detail}", data=cache
        )
    return Check("prefix_cache_hits", True, False, detail, data=cache)


def _ms(value: float | None) -> str:
    return "not reported" if value is None else f"{value:.4g} ms"


def _batch(load: LoadResult, config: LoadConfig) -> list[Check]:
    batch = load.batch
    spread, limit = batch["max_spread"], batch["limit"]
    what = "bitwise identical" if batch["bitwise"] else f"max logprob spread {spread:.3g} ({batch['where']})"
    bound = "bitwise (batch-invariant mode)" if config.bitwise else f"the dtype's noise {limit:.3g}"
    verdict = "within" if batch["passed"] else "beyond"
    check = Check(
        "batch_invariance_load",
        batch["passed"],
        True,
        f"same prompt across concurrency {', '.join(map(str, config.levels))}: {what}, {verdict} {bound}",
        data=batch,
    )
    return [check] if config.bitwise else [check, skipped("batch_invariant_bitwise", BITWISE_HINT)]
