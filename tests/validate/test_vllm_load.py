"""`validate --load` on vLLM's CPU build for real: the trained fixture replayed at concurrency 1, 8 and 32 with
prefix caching on, a block of 32 tokens (so repeated prompts hit) and chunked prefill forced by a 64-token batch
budget (the long prompt is split). One engine start for the module, one more for the kill-and-restart test (last).

- A sound engine passes every condition; the prefix cache is hit (engine counters and per-response cached tokens)
  and hits equal misses within the comparator.
- Seeded faults through tests/validate/load_proxy.py: logprobs perturbed only while another request is in flight
  fail naming concurrency; perturbed only on prefix-cache hits fail naming the prefix cache; a clean proxy passes.
- `validate --engine vllm --load --kv-blocks 17` (the CLI): the engine preempts, and every answer still passes.
- Several endpoints (the engine, a clean proxy, a proxy wrong from generated token 2): the pair matrix names the
  diverging replica, its first prompt and position.
- The engine killed mid-run and restarted: the run completes, the interrupted requests are reported, nothing lost or
  counted twice. An endpoint that never comes back: EndpointLost after the recovery timeout.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from onboard.comparator import tolerances
from onboard.engines.launch import free_port
from onboard.validate_serving.endpoint import EndpointCandidate
from onboard.validate_serving.endpoint_pairs import endpoints_agree, greedy_runs
from onboard.validate_serving.golden import record
from onboard.validate_serving.load import EndpointLost, LoadConfig, LoadResult, plan, replay
from onboard.validate_serving.load_checks import load_checks
from tests.validate.load_proxy import LATE_FROM, LoadProxy
from tests.validate.vllm_server import require_vllm, serve

pytestmark = pytest.mark.vllm
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "trained-qwen3"
CHUNK = 64
ENGINE_ARGS = (
    "--block-size", "32", "--max-num-batched-tokens", str(CHUNK), "--max-num-seqs", "32",
    "--enable-prompt-tokens-details",
)  # fmt: skip
CONFIG = LoadConfig(levels=(1, 8, 32), prefill_chunk=CHUNK)


@pytest.fixture(autouse=True, scope="module")
def _vllm_installed() -> None:
    require_vllm()


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory):
    return record(
        str(FIXTURE), tmp_path_factory.mktemp("load") / "golden", max_new_tokens=6, calibrate=("float32",),
        max_long_tokens=2 * CHUNK + 16,
    )  # fmt: skip


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, int, Path]:
    port = free_port()
    log = tmp_path_factory.mktemp("engine") / "vllm.log"
    with serve(FIXTURE, "q", log, extra_args=ENGINE_ARGS, port=port) as url:
        yield url, port, log


def _replay(url: str, golden, config: LoadConfig = CONFIG) -> LoadResult:
    candidate = EndpointCandidate(url, "q", "float32", timeout_s=120)
    tol = tolerances("float32", golden.noise("float32"))
    return replay(candidate, golden, tol, 2 * golden.top_k, config)


def _serving(result: LoadResult):
    return next(c for c in load_checks(result, CONFIG) if c.name == "serving_under_load")


def test_sound_engine_passes_at_every_level_with_cache_hits(engine, golden) -> None:
    result = _replay(engine[0], golden)
    check = _serving(result)
    print(check.detail, result.cache, result.batch, sep="\n")
    assert check.passed, check.detail
    names = {c.name for c in result.conditions}
    assert {"concurrency 1", "concurrency 8", "concurrency 32", "prefix-cache hit", "prefix-cache miss"} <= names
    assert {"chunked prefill", "whole prefill"} <= names, "the long prompt must pass the 64-token chunk"
    assert result.cache["engine_hit_rate"] > 0 and result.cache["responses_with_hits"] > 0
    assert result.hit_vs_miss["pairs"] > 0 and result.hit_vs_miss["passed"], result.hit_vs_miss
    assert result.batch["passed"] and result.requests == len(plan(golden, CONFIG.levels)) and not result.retried
    per_level = sum(c.requests for c in result.conditions if c.name.startswith("concurrency "))
    assert per_level == result.requests  # every request counted once


@pytest.mark.parametrize(
    ("mode", "cause"), [("concurrent", "concurrency"), ("cache_hit", "prefix cache"), ("clean", None)]
)
def test_seeded_fault_fails_naming_its_condition(engine, golden, mode: str, cause: str | None) -> None:
    proxy = LoadProxy(engine[0], mode)
    try:
        result = _replay(proxy.url, golden)
    finally:
        proxy.stop()
    check = _serving(result)
    print(mode, proxy.perturbed, "of", proxy.completions, check.detail)
    if cause is None:
        assert check.passed, check.detail
        return
    assert proxy.perturbed > 0 and not check.passed
    assert result.causes and all(c.startswith(cause) for c in result.causes), result.causes
    assert f"caused by {cause}" in check.detail


def test_a_small_kv_cache_forces_preemption_and_answers_stay_equal(tmp_path: Path) -> None:
    """`onboard validate --engine vllm --load --kv-blocks 17` through the CLI: vLLM started with the smallest KV
    cache it accepts (one 512-token request) and per-response cached tokens; at concurrency 8 and 32 the running
    requests outgrow the cache as they decode (40 tokens each: every one needs a new block on the way) and the
    scheduler preempts; every answer still passes, prefix-cache hits and misses among them."""
    import json
    import subprocess
    import sys

    golden = tmp_path / "golden"
    record(str(FIXTURE), golden, max_new_tokens=40, calibrate=("float32",), max_long_tokens=2 * CHUNK + 16)
    out = subprocess.run(
        [sys.executable, "-m", "onboard", "validate", str(FIXTURE), "--golden", str(golden), "--engine", "vllm",
         "--load", "--kv-blocks", "17", "--prefill-chunk", str(CHUNK), "--no-performance", "--json",
         "--out", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=900, env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout)
    checks = {c["name"]: c for c in result["checks"]}
    print(checks["preemption_under_load"]["detail"], checks["serving_under_load"]["detail"], sep="\n")
    assert result["check_data"]["preemption_under_load"]["preemptions"] > 0
    assert checks["preemption_under_load"]["passed"] and not checks["preemption_under_load"]["skipped"]
    assert checks["serving_under_load"]["passed"] and "prefix-cache hit" in checks["serving_under_load"]["detail"]


def test_endpoint_pair_matrix_names_the_replica_that_diverges(engine, golden) -> None:
    """Three endpoints on one engine: itself, a clean proxy (another route to the same replica) and a proxy whose
    logprobs go wrong from generated token 2: the matrix passes the first pair and names the third's prompt and
    position against both."""
    clean, late = LoadProxy(engine[0]), LoadProxy(engine[0], "late")
    try:
        runs = {
            url: greedy_runs(golden, EndpointCandidate(url, "q", "float32", timeout_s=120), 2 * golden.top_k)
            for url in (engine[0], clean.url, late.url)
        }
    finally:
        clean.stop(), late.stop()
    check = endpoints_agree(golden, runs, tolerances("float32", golden.noise("float32")))
    print(check.detail)
    pairs = {(p["a"], p["b"]): p for p in check.data["pairs"]}
    assert pairs[engine[0], clean.url]["passed"], pairs[engine[0], clean.url]
    assert not check.passed and late.perturbed > 0
    for key in ((engine[0], late.url), (clean.url, late.url)):
        first = pairs[key]["first"]
        assert not pairs[key]["passed"] and first["prompt"] == golden.prompts[0].name, pairs[key]
        assert first["generated_index"] == LATE_FROM and first["kind"] == "distribution", first


def test_endpoint_that_never_comes_back_is_a_named_error(engine, golden) -> None:
    proxy = LoadProxy(engine[0])
    candidate = EndpointCandidate(proxy.url, "q", "float32", timeout_s=20, retries=0)
    threading.Timer(0.5, proxy.stop).start()
    tol = tolerances("float32", golden.noise("float32"))
    with pytest.raises(EndpointLost, match=r"no answer for 3 s.*of \d+ requests answered"):
        replay(candidate, golden, tol, 2 * golden.top_k, LoadConfig(levels=(1, 8, 32), recovery_timeout_s=3))


def test_engine_killed_mid_run_completes_after_restart(engine, golden, tmp_path: Path) -> None:
    """Last in the module: it kills the module's engine (the restarted one is stopped at the end)."""
    url, port, _ = engine
    candidate = EndpointCandidate(url, "q", "float32", timeout_s=60, retries=0)
    tol = tolerances("float32", golden.noise("float32"))
    config = LoadConfig(levels=(1, 8, 32), recovery_timeout_s=400)
    box: dict[str, object] = {}
    runner = threading.Thread(
        target=lambda: box.update(result=_catch(replay, candidate, golden, tol, 2 * golden.top_k, config))
    )
    runner.start()
    _wait_until_running(url, at_least=4, runner=runner)  # several requests in flight: the kill interrupts them
    os.killpg(os.getpgid(_engine_pid(port)), signal.SIGKILL)  # the engine and its workers (their own session)
    _wait_port_free(port)
    with serve(FIXTURE, "q", tmp_path / "vllm-restarted.log", extra_args=ENGINE_ARGS, port=port):
        runner.join(timeout=600)
    result = box["result"]
    assert isinstance(result, LoadResult), result
    print(f"retried after the kill: {list(result.retried)}")
    assert result.retried, "the kill must interrupt requests in flight"
    assert result.requests == len(plan(golden, config.levels))
    assert sum(c.requests for c in result.conditions if c.name.startswith("concurrency ")) == result.requests
    assert _serving(result).passed, _serving(result).detail


def _catch(fn, *args):
    try:
        return fn(*args)
    except Exception as exc:  # handed to the test thread
        return exc


def _wait_until_running(url: str, at_least: int, runner: threading.Thread) -> None:
    """Until vLLM's `vllm:num_requests_running` gauge (/metrics) reaches `at_least`: a fixed sleep missed a replay
    that ended in under a second on an idle machine."""
    while runner.is_alive():
        with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
            lines = resp.read().decode().splitlines()
        if sum(float(x.rsplit(" ", 1)[1]) for x in lines if x.startswith("vllm:num_requests_running")) >= at_least:
            return
        time.sleep(0.005)
    pytest.fail("the replay ended before the engine had requests in flight to interrupt")


def _wait_port_free(port: int) -> None:
    from onboard.engines.launch import EngineStartError, check_port

    for _ in range(120):
        try:
            return check_port(port)
        except EngineStartError:
            time.sleep(0.5)
    check_port(port)


def _engine_pid(port: int) -> int:
    """This process's child serving on `port` (the vLLM server the fixture started)."""
    me = str(os.getpid())
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if stat[1] == me and str(port).encode() in cmdline:
            return int(pid)
    raise AssertionError(f"no child process serving port {port}")
