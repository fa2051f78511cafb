"""`validate --load`'s replay on llama.cpp for real: the trained fixture's F16 GGUF served with its prompt cache
(llamacpp_server.py --prompt-cache: the KV of the prefix shared with the previous sequence is kept, as llama-server's
cache_prompt), replayed at concurrency 1, 8 and 32 (the server runs one sequence at a time: the others queue). One
conversion, one engine start.

Every condition passes against the goldens, the cache is hit (cached tokens per response), and answers served from
the cache equal cold ones within the comparator.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytestmark = [pytest.mark.llamacpp, pytest.mark.usefixtures("_llamacpp_installed", "_one_torch_thread")]
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "trained-qwen3"


def test_replay_passes_with_prompt_cache_hits(tmp_path: Path) -> None:
    from onboard.comparator import tolerances
    from onboard.engines import llamacpp
    from onboard.engines.convert import convert_gguf
    from onboard.validate_serving.endpoint import EndpointCandidate
    from onboard.validate_serving.golden import record
    from onboard.validate_serving.load import LoadConfig, plan, replay
    from onboard.validate_serving.load_checks import load_checks

    model = tmp_path / "trained-qwen3"
    shutil.copytree(FIXTURE, model, ignore=shutil.ignore_patterns("corpus.txt.gz"))
    golden = record(str(model), tmp_path / "golden", max_new_tokens=4, calibrate=("float16",), max_long_tokens=96)
    converted, code = convert_gguf(str(model), "f16", None, tmp_path / "model-f16.gguf", "qwen2")
    assert code == 0 and converted["gguf"], converted["findings"]
    config = LoadConfig(levels=(1, 8, 32))
    with llamacpp.serve(Path(converted["gguf"]), "q", tmp_path / "llamacpp.log", prompt_cache=True) as url:
        candidate = EndpointCandidate(url, "q", "float16", timeout_s=120)
        tol = tolerances("float16", golden.noise("float16"))
        result = replay(candidate, golden, tol, 2 * golden.top_k, config)
    checks = {c.name: c for c in load_checks(result, config)}
    print(checks["serving_under_load"].detail, checks["prefix_cache_hits"].detail, sep="\n")
    assert checks["serving_under_load"].passed, checks["serving_under_load"].detail
    names = {c.name for c in result.conditions}
    assert {"concurrency 1", "concurrency 8", "concurrency 32", "prefix-cache hit", "prefix-cache miss"} <= names
    warm = len(golden.prompts[0::2])  # at concurrency 1 each sent twice in a row: the second reuses the first's KV
    assert result.cache["responses_with_hits"] >= warm and checks["prefix_cache_hits"].passed
    assert result.cache["engine_hit_rate"] is None  # no /metrics counters: the rate is the responses' cached tokens
    assert result.hit_vs_miss["pairs"] >= warm and result.hit_vs_miss["passed"], result.hit_vs_miss
    assert result.requests == len(plan(golden, config.levels)) and not result.retried
