"""`onboard generate`: writes adapter + engine configs, refuses to overwrite without --force (Error/Hint, exit 2),
byte-identical on regeneration, ruff-clean output, --json stage result, profile JSON input, unknown family."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

RUFF = Path(sys.executable).parent / "ruff"


def _onboard(*args: str) -> subprocess.CompletedProcess[str]:
    env = {"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin", "TRANSFORMERS_VERBOSITY": "error"}
    return subprocess.run(
        [sys.executable, "-m", "onboard", *args], capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=120
    )


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_generate_json_force_and_determinism(tiny, tmp_path: Path) -> None:
    ckpt, out = tiny("qwen3"), tmp_path / "out"
    first = _onboard("generate", str(ckpt), "--out", str(out), "--json")
    assert first.returncode == 0, first.stderr
    result = json.loads(first.stdout)
    assert result["stage"] == "generate" and result["passed"] is True
    names = {c["name"]: c for c in result["checks"]}
    assert {"adapter_rendered", "adapter_imports", "kernels_implemented"} <= set(names)
    assert all(c["passed"] and isinstance(c["detail"], str) for c in names.values() if c["required"])
    # Without --parity no reference ran: reported unverified, never passed.
    assert result["verification"] == "unverified" and not names["adapter_parity"]["passed"]
    assert names["adapter_parity"]["detail"].startswith("unverified")
    assert set(result["files"]) == {"adapters/qwen3.py", "engine/vllm.sh", "engine/sglang.sh", "engine/engine.json"}
    before = _tree(out)

    again = _onboard("generate", str(ckpt), "--out", str(out))
    assert again.returncode == 2
    assert "Error:" in again.stderr and "Hint:" in again.stderr and "--force" in again.stderr
    assert "Traceback" not in again.stderr
    assert _tree(out) == before, "a refused run must leave the files untouched"

    forced = _onboard("generate", str(ckpt), "--out", str(out), "--force")
    assert forced.returncode == 0, forced.stderr
    assert _tree(out) == before, "regeneration from the same profile must be byte-identical"
    assert (out / "adapters/qwen3.py").read_text() == (REPO_ROOT / "adapters/qwen3.py").read_text()
    engine = json.loads((out / "engine/engine.json").read_text())
    assert engine["vllm"]["argv"][:3] == ["vllm", "serve", str(ckpt)]
    assert "--reasoning-parser" in engine["vllm"]["argv"] and "--max-model-len" in engine["vllm"]["argv"]
    assert "--tp" in engine["sglang"]["argv"]


def test_output_is_ruff_clean(tiny, tmp_path: Path) -> None:
    from onboard.generate_adapter import generate

    generate(tiny("gemma2"), tmp_path)
    cfg = str(REPO_ROOT / "pyproject.toml")
    lint = subprocess.run([str(RUFF), "check", "--config", cfg, str(tmp_path)], capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    fmt = subprocess.run(
        [str(RUFF), "format", "--check", "--config", cfg, str(tmp_path)], capture_output=True, text=True
    )
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


def test_profile_json_input_gives_the_same_adapter(tiny, tmp_path: Path) -> None:
    from onboard.generate_adapter import generate
    from onboard.inspect_checkpoint import inspect

    profile_file = tmp_path / "profile.json"
    profile_file.write_text(inspect(str(tiny("mistral"))).to_json())
    result = generate(profile_file, tmp_path / "from-json")
    assert result.passed
    assert (tmp_path / "from-json/adapters/mistral.py").read_text() == (REPO_ROOT / "adapters/mistral.py").read_text()


def test_unknown_family_is_a_clean_input_error(tmp_path: Path) -> None:
    ckpt = tmp_path / "weird"
    ckpt.mkdir()
    (ckpt / "config.json").write_text(json.dumps({"model_type": "totally_new_arch", "hidden_size": 8}))
    proc = _onboard("generate", str(ckpt), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2, proc.stderr
    assert "Error:" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("bad", ["not json", "{}"])
def test_bad_profile_json_is_an_input_error(tmp_path: Path, bad: str) -> None:
    (tmp_path / "p.json").write_text(bad)
    proc = _onboard("generate", str(tmp_path / "p.json"), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2 and "Error:" in proc.stderr and "Traceback" not in proc.stderr


def test_parity_flag_records_adapter_parity(tiny, tmp_path: Path) -> None:
    proc = _onboard("generate", str(tiny("olmo2")), "--out", str(tmp_path / "o"), "--parity", "--json")
    assert proc.returncode == 0, proc.stderr
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert checks["adapter_parity"]["passed"] and "max|Δ|/max|logit|" in checks["adapter_parity"]["detail"]
