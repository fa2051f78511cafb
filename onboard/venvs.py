"""Where each engine's own virtualenv lives (scripts/install_llama_cpp.sh and install_vllm_cpu.sh make them).

A core module: quantize-plan loads llama.cpp's library from there (quantize/ggml_native.py) without importing the
engines, which sit above quantize in the layer order (tests/test_import_graph.py).
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def llamacpp() -> Path:
    return Path(os.environ.get("ONBOARD_LLAMACPP_VENV", REPO / ".venv-llamacpp"))


def vllm() -> Path:
    return Path(os.environ.get("ONBOARD_VLLM_VENV", REPO / ".venv-vllm"))
