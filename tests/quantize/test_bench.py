"""benchmarks/bench_quantize_plan.py runs (its --quick model): the sweep-cost benchmark stays working."""

from __future__ import annotations

import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_quantize_plan.py"


def test_bench_quick(capsys) -> None:  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("bench_quantize_plan", BENCH)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    result = module.main(["--quick", "--threads", "1"])
    assert result["units"] == 10 and result["sweep_seconds"] > 0 and result["forward_seconds"] > 0
    assert "ratio sweep / (units x forward)" in capsys.readouterr().out


def test_bench_quick_without_llamacpps_quantizers(capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Without llama.cpp's library the benchmark sweeps the formats quantize-plan would (Q3_K has no torch port) and
    says which it left out, instead of failing on Q3_K's rounding."""
    from onboard.quantize import ggml_native

    monkeypatch.setenv(ggml_native.DISABLE_ENV, "0")
    ggml_native._library.cache_clear()
    spec = importlib.util.spec_from_file_location("bench_quantize_plan", BENCH)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    try:
        result = module.main(["--quick", "--threads", "1"])
    finally:
        ggml_native._library.cache_clear()
    out = capsys.readouterr().out
    assert result["sweep_seconds"] > 0 and "sweep (11 formats)" in out
    assert "left out: q3_k: needs q3_k and iq4_nl from llama.cpp's own quantizers" in out
