"""benchmarks/bench_sandbox.py runs (its --quick version): the benchmark's code path stays working."""

from __future__ import annotations

import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_sandbox.py"


def test_bench_sandbox_quick(bubblewrap: str, capsys) -> None:  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("bench_sandbox", BENCH)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    (row,) = module.main(["--quick"])
    assert row["max_abs_diff"] == 0.0  # same dtype, same threads: the sandboxed reference is bit-identical
    assert row["in_process_s"] > 0 and row["sandbox_s"] > 0 and row["whole_call_s"] > row["sandbox_s"]
    assert f"isolation: {bubblewrap}" in capsys.readouterr().out
