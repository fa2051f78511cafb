"""The load replay without an engine: its request plan, how it names the factor behind failures, the engine's
counters, and `validate --load`'s option errors. (The replay itself runs on vLLM in test_vllm_load.py.)"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from onboard.cli import main
from onboard.validate_serving.load import ConditionResult, LoadConfig, LoadResult, _causes, parse_counters, plan
from onboard.validate_serving.load_checks import load_checks


@dataclass(frozen=True)
class _Prompt:
    name: str


@dataclass(frozen=True)
class _Golden:
    prompts: tuple[_Prompt, ...]


def test_plan_repeats_warm_prompts_alone_and_sends_cold_ones_first_under_concurrency() -> None:
    golden = _Golden(tuple(_Prompt(f"p{i}") for i in range(5)))
    requests = plan(golden, (1, 8, 32))  # type: ignore[arg-type]
    assert [r.id for r in requests] == list(range(len(requests)))  # ids unique, in send order
    level1 = [r.prompt.name for r in requests if r.level == 1]
    assert level1 == ["p0", "p0", "p2", "p2", "p4", "p4"]  # each warm prompt's cold miss, then its hit, alone
    level8 = [r.prompt.name for r in requests if r.level == 8]
    assert level8[:2] == ["p1", "p3"] and len(level8) == 8  # cold prompts meet the engine first with others in flight
    assert len([r for r in requests if r.level == 32]) == 32


def _c(name: str, passed: bool) -> ConditionResult:
    return ConditionResult(name, 4, 0 if passed else 2, passed, ())


def test_causes_name_the_factor_whose_baseline_passes() -> None:
    concurrency = [_c("concurrency 1", True), _c("concurrency 8", False), _c("prefix-cache miss", False),
                   _c("prefix-cache hit", False)]  # fmt: skip
    assert _causes(concurrency) == ("concurrency (passes alone, fails at concurrency 8)",)
    cache = [_c("concurrency 1", False), _c("concurrency 8", False), _c("prefix-cache miss", True),
             _c("prefix-cache hit", False)]  # fmt: skip
    assert _causes(cache) == ("prefix cache (cold prompts pass, prompts served from the prefix cache fail)",)
    chunk = [_c("concurrency 1", False), _c("whole prefill", True), _c("chunked prefill", False)]
    assert _causes(chunk) == ("chunked prefill (prompts within one chunk pass, longer ones fail)",)
    assert _causes([_c("concurrency 1", True), _c("concurrency 8", True)]) == ()


def test_counters_sum_over_labels() -> None:
    text = (
        "# HELP vllm:prefix_cache_hits_total x\n"
        'vllm:prefix_cache_hits_total{engine="0",model_name="q"} 96.0\n'
        'vllm:prefix_cache_hits_total{engine="1",model_name="q"} 4.0\n'
        'vllm:prefix_cache_queries_total{engine="0",model_name="q"} 400.0\n'
        "vllm:prefix_cache_queries_created 1.7e9\n"
    )
    assert parse_counters(text) == {"prefix_cache_hits": 100.0, "prefix_cache_queries": 400.0}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--load", "--load-levels", "8,32"], "starting with 1"),
        (["--load", "--load-levels", "1,x"], "comma-separated positive integers"),
        (["--prefill-chunk", "64"], "need --load"),
        (["--kv-blocks", "17"], "need --load"),
        (["--load", "--kv-blocks", "17"], "needs --engine vllm"),
        (["--load", "--engine", "vllm", "--kv-blocks", "4"], "at least 17 blocks of 32 tokens"),
    ],
)
def test_load_options_are_checked_before_anything_runs(capsys, tmp_path, args: list[str], message: str) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["validate", str(tmp_path / "nothing"), *args])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_report_section_reads_the_checks_data() -> None:
    from onboard.validate_serving.load_report import section

    assert section({"check_data": {}}) == ([], [])  # validate ran without --load
    conditions = [
        {"name": f"concurrency {n}", "requests": n, "failed_requests": 0, "passed": True, "reasons": [],
         "ttft_p50_ms": 10.0 * n, "ttft_p99_ms": 20.0 * n, "itl_p50_ms": 5.0, "itl_p99_ms": 9.0, "tokens_per_s": 100.0}
        for n in (1, 8, 32)
    ] + [{"name": "prefix-cache hit", "requests": 4, "failed_requests": 4, "passed": False, "reasons": ["p0: x"]}]  # fmt: skip
    cache = {"engine_hit_rate": 0.25, "responses_with_hits": 4, "responses_reporting": 41,
             "ttft_hit_p50_ms": 30.0, "ttft_miss_p50_ms": 12.0}  # fmt: skip
    validate = {"check_data": {"serving_under_load": {"conditions": conditions, "causes": ["prefix cache (...)"],
                                                      "requests": 41, "retried": [7]},
                               "prefix_cache_hits": cache, "preemption_under_load": {"preemptions": 19.0}}}  # fmt: skip
    plots, tables = section(validate)
    assert [p[0] for p in plots] == ["plot-load-latency", "plot-load-cache"] and "(log)" in plots[0][2]
    ((title, _, rows),) = tables
    by_name = {r[0]: r for r in rows}
    assert title == "Serving under load (41 requests)" and by_name["concurrency 8"][3] == "80 / 160"
    assert by_name["prefix-cache hit"][-1] == "FAIL: p0: x" and by_name["causes"][-1] == "prefix cache (...)"
    assert by_name["preempted (engine counter)"][1] == "19"
    assert by_name["retried after an engine failure"][1:2] == ("1",) and "25.0%" in by_name["prefix cache"][-1]


@pytest.mark.parametrize(
    ("counters", "small_kv", "verdict"),
    [
        ({}, False, "not observable"),
        ({"preemptions": 0.0}, False, "not exercised: the engine preempted no request"),
        ({"preemptions": 0.0}, True, "not exercised: a small KV cache was asked for"),
        ({"preemptions": 3.0}, True, "3 preemptions during the replay of 4 requests"),
    ],
)
def test_preemption_is_reported_from_the_engine_counter(counters: dict, small_kv: bool, verdict: str) -> None:
    load = LoadResult((_c("concurrency 1", True),), (), 4, (), cache={"engine_counters": counters}, batch={
        "max_spread": 0.0, "limit": 0.0, "bitwise": True, "where": None, "passed": True})  # fmt: skip
    check = next(c for c in load_checks(load, LoadConfig(small_kv=small_kv)) if c.name == "preemption_under_load")
    assert check.detail.startswith(verdict), check.detail
    assert check.skipped is (not counters.get("preemptions")) and not check.required
    assert check.passed is bool(counters.get("preemptions"))  # a skip is never a pass
