"""Where each engine's own virtualenv lives (scripts/install_llama_cpp.sh and install_vllm_cpu.sh make them).

One place for both, importing nothing of the engines: quantize-plan loads llama.cpp's library from there
(quantize/ggml_native.py) without pulling in the engine modules, which import quantize themselves.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def llamacpp() -> Path:
    return Path(os.environ.get("ONBOARD_LLAMACPP_VENV", REPO / ".venv-llamacpp"))


def vllm() -> Path:
    return Path(os.environ.get("ONBOARD_VLLM_VENV", REPO / ".venv-vllm"))
