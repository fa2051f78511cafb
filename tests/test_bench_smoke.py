"""The benchmarks run (small versions): their code paths stay working between full runs."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


def _load(name: str):  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_local_bench_quick(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    times = _load("bench_inspect_local").main(["--quick", "--no-meta", "--repeats", "1", "--dir", str(tmp_path / "c")])
    assert set(times) == {"bare", "headers", "inspect"} and all(t > 0 for t in times.values())
    out = capsys.readouterr().out
    assert "ratio inspect/bare" in out and "parameters (inspect): 3,106,036,736" in out


def test_synthetic_checkpoint_matches_the_meta_model_layout() -> None:
    synthetic = _load("_synthetic")
    cfg = synthetic.config(quick=True)
    names = [n for n, _, _ in synthetic.tensors(cfg)]
    assert len(names) == len(set(names))
    moe_layers = cfg["num_hidden_layers"] - cfg["first_k_dense_replace"]
    assert (
        sum(".experts." in n and n.endswith("gate_proj.weight") for n in names) == moe_layers * cfg["n_routed_experts"]
    )


def test_hub_bench_quick() -> None:
    # A subprocess: the benchmark sets HF_* variables for itself before importing huggingface_hub.
    import subprocess

    proc = subprocess.run(
        [sys.executable, str(BENCH / "bench_inspect_hub.py"), "--quick"], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "speed-up hf/headers" in proc.stdout and "Traceback" not in proc.stderr
