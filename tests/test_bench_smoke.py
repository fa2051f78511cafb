"""The benchmarks run (small versions): their code paths stay working between full runs."""

from __future__ import annotations

import importlib.util
import json
import re
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
    assert _load("bench_inspect_local").main(["--quick", "--repeats", "1", "--dir", str(tmp_path / "c")]) == 0
    out = capsys.readouterr().out
    assert re.search(r"inspect DIR --json +\d+ ms \(\d+ ms CPU\) whole process", out), out
    counted = re.search(r"parameters \(inspect\): ([\d,]+)", out)
    assert counted, out
    config = json.loads((tmp_path / "c" / "config.json").read_text())
    assert _number(counted.group(1)) == _transformers_parameters(config)


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def _transformers_parameters(config: dict) -> int:
    """The count transformers gives the same config (a meta-device model: shapes only), not a pinned number."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = dict(config)
    cfg.pop("quantization_config", None)  # fp8 scales are not parameters; from_config would set up fp8 kernels
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**cfg), trust_remote_code=False)
    return model.num_parameters()


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
        [sys.executable, str(BENCH / "bench_inspect_hub.py"), "--quick", "--against-hf"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert re.search(r"bytes served [\d.]+x the bytes needed \(ceiling 1.1x\)", proc.stdout), proc.stdout
    # The same counts as huggingface_hub's metadata and as transformers' model of the quick layout, not just no crash.
    ours = re.search(r"parameters by dtype: inspect (\{.*\})", proc.stdout)
    theirs = re.search(r"parameters by dtype: huggingface_hub (\{.*\})", proc.stdout)
    model = re.search(r"parameters: inspect ([\d,]+)", proc.stdout)
    assert ours and theirs and model, proc.stdout
    by_dtype = json.loads(ours.group(1))
    assert by_dtype and by_dtype.items() <= json.loads(theirs.group(1)).items()  # fp8 scales are not parameters
    assert _number(model.group(1)) == _transformers_parameters(_load("_synthetic").config(quick=True))
