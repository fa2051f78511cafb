"""benchmarks/bench_kernels.py --interpret-smoke runs every kernel once on CPU and checks it against its reference."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from tests.conftest import REPO_ROOT
from tests.kernels.tolerances import KERNEL_DEVICE


@pytest.mark.skipif(KERNEL_DEVICE != "cpu", reason="CPU tensors through Triton need the interpreter")
def test_interpret_smoke_runs_and_agrees(capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("bench_kernels", REPO_ROOT / "benchmarks" / "bench_kernels.py")
    bench = importlib.util.module_from_spec(spec)
    sys.modules["bench_kernels"] = bench  # dataclasses look their module up there
    spec.loader.exec_module(bench)
    assert bench.main(["--interpret-smoke", "--dtype", "float32"]) == 0
    out = capsys.readouterr().out
    for name in ("rmsnorm(offset 1)", "rope(interleaved)", "swiglu", "geglu(tanh)", "softcap"):
        assert name in out
