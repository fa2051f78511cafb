"""Session fixtures for the validate tests: tiny checkpoints and their goldens, built once and shared."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.validate.tiny_models import build, edit_weights

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
NEW_TOKENS = 8
LONG_CAP = 96  # long prompts stay past every tiny boundary (window 16, rope 64) but short enough for CPU tests
HOT_FACTOR = 3000.0  # layer-0 MLP output x3000: activations ~1e5, past float16's 65504, harmless in float32


def _hot(tensors: dict) -> dict:
    key = "model.layers.0.mlp.down_proj.weight"
    tensors[key] = tensors[key] * HOT_FACTOR
    return tensors


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread() -> object:
    """Tiny models: one intra-op thread is ~5x faster than two contending on a 2-core box; restored afterwards."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@dataclass
class Tiny:
    root: Path
    checkpoint: Callable[[str], Path]
    golden: Callable[[str], object]


@pytest.fixture(scope="session")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Tiny:
    """`tiny.checkpoint(kind)` and `tiny.golden(kind)` for llama, qwen3, gemma2, qwen3_moe, llama_hot (lazy)."""
    from onboard.validate_serving.golden import record

    root = tmp_path_factory.mktemp("validate_tiny")
    paths: dict[str, Path] = {}
    goldens: dict[str, object] = {}

    def checkpoint(kind: str) -> Path:
        if kind not in paths:
            if kind == "llama_hot":
                paths[kind] = edit_weights(checkpoint("llama"), root / kind, _hot)
            else:
                paths[kind] = build(kind, root / kind)
        return paths[kind]

    def golden(kind: str) -> object:
        if kind not in goldens:
            goldens[kind] = record(
                str(checkpoint(kind)), root / f"golden_{kind}", max_new_tokens=NEW_TOKENS, calibrate=("float32",),
                max_long_tokens=LONG_CAP,
            )  # fmt: skip
        return goldens[kind]

    return Tiny(root, checkpoint, golden)
