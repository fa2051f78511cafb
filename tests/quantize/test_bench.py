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
