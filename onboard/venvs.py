"""Where each engine's own virtualenv lives (scripts/install_llama_cpp.sh and install_vllm_cpu.sh make them): core,
so quantize can load llama.cpp's library without importing the engines above it."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def llamacpp() -> Path:
    return Path(os.environ.get("ONBOARD_LLAMACPP_VENV", REPO / ".venv-llamacpp"))


def vllm() -> Path:
    return Path(os.environ.get("ONBOARD_VLLM_VENV", REPO / ".venv-vllm"))
