"""Tiny checkpoints for the generate tests, built once per session from tests/tiny (the shared factory).

Every tensor is then perturbed with seeded noise: transformers initialises norms to 1, biases to 0 and some
parameters (sinks, correction biases, Gemma's (1 + w) weights) to constants, which would hide a wrong offset, a
dropped bias or a mis-fused projection.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Archs the parity harness must cover (issue 4 acceptance); tests/generate/test_registry.py checks the registry.
REQUIRED_ARCHS = (
    "llama mistral mixtral qwen2 qwen2_moe qwen3 qwen3_moe gemma gemma2 gemma3_text phi3 phimoe deepseek_v3 gpt_oss "
    "olmo2 olmoe granite granitemoe cohere starcoder2 glm4 smollm3 ernie4_5 exaone4 apertus"
).split()

# Knobs that switch on code paths the TINY defaults leave off.
OVERRIDES: dict[str, dict] = {
    "llama": {"attention_bias": True, "mlp_bias": True},
    "qwen2": {"use_sliding_window": True, "max_window_layers": 1},
    "qwen2_moe": {"norm_topk_prob": True},
    "ernie4_5": {"use_bias": True},
    "smollm3": {"use_sliding_window": True},
}


def perturb(checkpoint: Path, seed: int = 0, std: float = 0.05) -> None:
    """Add seeded noise to every tensor of checkpoint/model.safetensors (in place, same dtypes)."""
    import torch
    from safetensors.torch import load_file, save_file

    file = checkpoint / "model.safetensors"
    tensors = load_file(str(file))
    g = torch.Generator().manual_seed(seed)
    out = {}
    for name in sorted(tensors):
        t = tensors[name]
        noise = torch.randn(t.shape, generator=g, dtype=torch.float32) * std
        out[name] = (t.float() + noise).to(t.dtype) if t.is_floating_point() and not name.endswith("act_fn.eps") else t
    save_file(out, str(file), metadata={"format": "pt"})


class TinyCheckpoints:
    """model_type -> a perturbed tiny checkpoint folder, built on first use and kept for the session."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._built: dict[tuple[str, str], Path] = {}

    def __call__(self, model_type: str, dtype: str = "float32") -> Path:
        key = (model_type, dtype)
        if key not in self._built:
            from tests.tiny.factory import make_tiny_checkpoint

            out = make_tiny_checkpoint(
                model_type, self.root / f"{model_type}-{dtype}", dtype=dtype, overrides=OVERRIDES.get(model_type)
            )
            perturb(out)
            self._built[key] = out
        return self._built[key]


@pytest.fixture(scope="session")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> TinyCheckpoints:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    return TinyCheckpoints(tmp_path_factory.mktemp("tiny-generate"))
