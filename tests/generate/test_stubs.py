"""A checkpoint with features outside the block library (an unknown tensor, an unknown config field) gets an
adapter plus kernel stubs, and the adapter refuses to run until the stubs are implemented: never a silent
fallback. Unknown model types are composed from their profile plus stubs for what the blocks lack."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from onboard.generate_adapter import generate
from onboard.generate_adapter.parity import load_adapter
from onboard.generate_adapter.runtime import NotRunnable
from tests.conftest import REPO_ROOT


def _novel_checkpoint(tiny, tmp_path: Path) -> Path:
    """Tiny llama + a per-layer `self_attn.temperature_gate` tensor + an `attn_temperature_tuning` config field."""
    from safetensors.torch import load_file, save_file

    ckpt = tmp_path / "novel-llama"
    shutil.copytree(tiny("llama"), ckpt)
    tensors = load_file(str(ckpt / "model.safetensors"))
    for i in range(2):
        tensors[f"model.layers.{i}.self_attn.temperature_gate.weight"] = torch.ones(4, 64)
    save_file(tensors, str(ckpt / "model.safetensors"), metadata={"format": "pt"})
    config = json.loads((ckpt / "config.json").read_text())
    config["attn_temperature_tuning"] = 0.1
    (ckpt / "config.json").write_text(json.dumps(config))
    return ckpt


def test_unknown_tensor_and_config_field_give_stubs_and_a_refusing_adapter(tiny, tmp_path: Path) -> None:
    ckpt, out = _novel_checkpoint(tiny, tmp_path), tmp_path / "out"
    result = generate(ckpt, out)
    ops = {s["op"] for s in result.stubs}
    assert ops == {"self_attn_temperature_gate", "attn_temperature_tuning"}
    checks = {c.name: c for c in result.checks}
    assert checks["adapter_imports"].passed and not checks["kernels_implemented"].passed
    assert not result.passed
    for op in ops:
        assert (out / f"kernels/{op}.py").is_file() and (out / f"tests/kernels/test_{op}.py").is_file()
    adapter_text = (out / "adapters/llama.py").read_text()
    assert "TODO(kernels/self_attn_temperature_gate.py)" in adapter_text and "NOT RUNNABLE YET" in adapter_text

    adapter = load_adapter(out / "adapters/llama.py")
    with pytest.raises(NotRunnable, match=r"not runnable until kernels/attn_temperature_tuning\.py is implemented"):
        adapter.Model.from_pretrained(ckpt)

    kernel = load_adapter(out / "kernels/self_attn_temperature_gate.py")  # any file loads as a module
    assert kernel.IMPLEMENTED is False
    with pytest.raises(NotImplementedError, match="generated stub"):
        kernel.self_attn_temperature_gate_reference(torch.ones(3))

    # The generated kernel test fails while the stub is a stub (it is the to-do list, not a formality).
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(out / "tests/kernels")],
        capture_output=True,
        text=True,
        cwd=out,
        timeout=120,
        env={"TRITON_INTERPRET": "1", "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 1 and "NotImplementedError" in proc.stdout, proc.stdout[-2000:]

    # Marking the stubs implemented lifts the refusal (the op still has to be wired in by hand; loading then
    # reports the unconsumed tensors instead of silently ignoring them).
    for op in ops:
        path = out / f"kernels/{op}.py"
        path.write_text(path.read_text().replace("IMPLEMENTED = False", "IMPLEMENTED = True"))
    from onboard.generate_adapter.loader import WeightsError

    with pytest.raises(WeightsError, match=r"unused checkpoint tensors: .*temperature_gate"):
        adapter.Model.from_pretrained(ckpt)


def test_cli_exit_1_with_the_stub_message(tiny, tmp_path: Path) -> None:
    ckpt = _novel_checkpoint(tiny, tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "onboard", "generate", str(ckpt), "--out", str(tmp_path / "o"), "--json"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=120,
        env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 1, proc.stderr
    assert "not runnable until kernels/" in proc.stderr and "Hint:" in proc.stderr
    result = json.loads(proc.stdout)
    assert result["passed"] is False
    assert any(c["name"] == "kernels_implemented" and not c["passed"] for c in result["checks"])


def test_unknown_model_type_is_composed_plus_stubs(tiny, tmp_path: Path) -> None:
    ckpt = tmp_path / "my_qwen3"
    shutil.copytree(tiny("qwen3"), ckpt)
    config = json.loads((ckpt / "config.json").read_text())
    config["model_type"] = "my_qwen3"
    config["attention_sink_size"] = 4
    (ckpt / "config.json").write_text(json.dumps(config))
    result = generate(ckpt, tmp_path / "out")
    assert result.model_type == "my_qwen3" and result.closest_family == "qwen3"
    assert (tmp_path / "out/adapters/my_qwen3.py").is_file()
    assert "attention_sink_size" in {s["op"] for s in result.stubs}
