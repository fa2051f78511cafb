"""`onboard golden record` and `onboard validate` end to end through the real CLI entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.validate.defects import DEFECTS

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONWARNINGS": "ignore"}


def onboard(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "onboard", *args], capture_output=True, text=True, env=ENV, cwd=cwd, timeout=600
    )


def test_record_then_validate_json_contract(tiny, tmp_path: Path) -> None:
    ckpt = tiny.checkpoint("qwen3")
    rec = onboard("golden", "record", str(ckpt), "--out", str(tmp_path / "g"), "--max-new-tokens", "4",
                  "--calibrate", "float32", "--json", cwd=tmp_path)  # fmt: skip
    assert rec.returncode == 0, rec.stderr
    recorded = json.loads(rec.stdout)
    assert recorded["stage"] == "golden" and recorded["passed"] and (tmp_path / "g" / "MANIFEST.json").is_file()
    out = onboard(
        "validate", str(ckpt), "--golden", str(tmp_path / "g"), "--json", "--out", str(tmp_path / "run"), cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["stage"] == "validate" and result["passed"] is True
    assert all({"name", "passed", "required", "detail"} <= set(c) for c in result["checks"])
    assert result["positions"][0].keys() == {"prompt", "index", "kl", "max_logprob_error", "top1_agree"}
    perf = result["performance"]
    for key in ("prefill_by_length", "tpot_ms", "itl_p50_ms", "itl_p99_ms", "throughput_tok_s_b1", "throughput_tok_s_bN",
                "peak_memory_bytes", "hardware", "dtype", "versions"):  # fmt: skip
        assert key in perf, key
    saved = json.loads((tmp_path / "run" / "validation.json").read_text())
    assert saved["passed"] and saved["checks"] == result["checks"]
    summary = (tmp_path / "run" / "validation.md").read_text()
    assert "prefill latency" in summary and "TPOT" in summary and "PASSED" in summary


def test_validate_exits_1_on_a_defect_and_names_the_check(tiny, tmp_path: Path) -> None:
    """The checkpoint is the goldens' own; the defect is how it is served (float16 overflows its activations)."""
    out = onboard("validate", str(tiny.checkpoint("llama_hot")), "--golden", str(tiny.golden("llama_hot").folder),
                  "--dtype", "float16", "--no-performance", "--out", str(tmp_path / "v.json"), cwd=tmp_path)  # fmt: skip
    assert out.returncode == 1, out.stderr
    assert "[FAIL] fp16_overflow: reference activations exceed the float16 range" in out.stderr
    assert "Error: validation failed: " in out.stderr and "fp16_overflow" in out.stderr
    assert json.loads((tmp_path / "v.json").read_text())["passed"] is False


def test_a_seeded_checkpoint_defect_is_another_checkpoint(tiny, tmp_path: Path) -> None:
    """A broken copy (logits x10 in its weights) is not the checkpoint the goldens came from: refused, exit 2."""
    defect = next(d for d in DEFECTS if d.name == "logits_x10")
    broken = defect.copy(tiny.checkpoint("llama"), tmp_path / "broken")
    out = onboard("validate", str(broken), "--golden", str(tiny.golden("llama").folder), "--no-performance",
                  "--out", str(tmp_path / "v.json"), cwd=tmp_path)  # fmt: skip
    assert out.returncode == 2 and "goldens of another checkpoint" in out.stderr, out.stderr
    assert not (tmp_path / "v.json").exists()


def test_bad_inputs_exit_2_with_a_hint(tiny, tmp_path: Path) -> None:
    ckpt = str(tiny.checkpoint("qwen3"))
    missing = onboard("validate", ckpt, "--golden", str(tmp_path / "nowhere"), cwd=tmp_path)
    assert missing.returncode == 2 and "Error:" in missing.stderr and "Hint: record goldens first" in missing.stderr
    assert "Traceback" not in missing.stderr
    down = onboard("validate", ckpt, "--golden", str(tiny.golden("qwen3").folder), "--endpoint", "http://127.0.0.1:9",
                   "--served-model", "x", cwd=tmp_path)  # fmt: skip
    assert down.returncode == 2 and "cannot connect" in down.stderr and "Traceback" not in down.stderr
    dtype = onboard("validate", ckpt, "--dtype", "int3", cwd=tmp_path)
    assert dtype.returncode == 2 and "--dtype" in dtype.stderr
    assert not list(tmp_path.glob("**/*.tmp"))
