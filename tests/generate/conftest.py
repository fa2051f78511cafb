"""Tiny checkpoints for the generate tests, built once per session from tests/tiny (the shared factory).

Every tensor is then perturbed with seeded noise: transformers initialises norms to 1, biases to 0 and some
parameters (sinks, correction biases, Gemma's (1 + w) weights) to constants, which would hide a wrong offset, a
dropped bias or a mis-fused projection.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

# Archs the parity harness must cover (issue 4 acceptance); tests/generate/test_registry.py checks the registry.
REQUIRED_ARCHS = (
    "llama mistral mixtral qwen2 qwen2_moe qwen3 qwen3_moe gemma gemma2 gemma3_text phi3 phimoe deepseek_v3 gpt_oss "
    "olmo2 olmoe granite granitemoe cohere starcoder2 glm4 smollm3 ernie4_5 exaone4 apertus"
).split()

# Knobs that switch on code paths the TINY defaults leave off.
# They also make each committed adapter (composed from this checkpoint's profile: tests/generate/family_profiles.py)
# carry those paths: sliding windows, and the biases a config key switches (compose_knowledge.BIAS_SWITCHES).
OVERRIDES: dict[str, dict] = {
    "llama": {"attention_bias": True, "mlp_bias": True},
    "mixtral": {"sliding_window": 16},
    "qwen2": {"use_sliding_window": True, "max_window_layers": 1},
    "qwen2_moe": {"norm_topk_prob": True, "use_sliding_window": True, "sliding_window": 16, "max_window_layers": 1},
    "qwen3_moe": {"use_sliding_window": True, "sliding_window": 16},
    "ernie4_5": {"use_bias": True},
    "smollm3": {"use_sliding_window": True, "sliding_window": 16},
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


def copy_tiny(tiny, model_type: str, tmp_path: Path, name: str | None = None) -> Path:  # type: ignore[no-untyped-def]
    """A private copy of the tiny checkpoint of `model_type` (its config or tensors may then be edited)."""
    import shutil

    ckpt = tmp_path / (name or model_type)
    shutil.copytree(tiny(model_type), ckpt)
    return ckpt


def edit_config(ckpt: Path, **changes: object) -> dict:
    """config.json of `ckpt` with `changes` written over it; returns the new config."""
    import json

    path = ckpt / "config.json"
    config = json.loads(path.read_text())
    config.update(changes)
    path.write_text(json.dumps(config))
    return config


def composed_adapter(ckpt: Path, out: Path) -> Path:
    """The adapter composed from the checkpoint's profile, written to `out`."""
    from onboard.generate_adapter.adapter_source import adapter_source
    from onboard.generate_adapter.plan import plan
    from onboard.inspect_checkpoint import inspect

    out.mkdir(parents=True, exist_ok=True)
    the_plan = plan(inspect(str(ckpt)))
    assert not the_plan.stubs, the_plan.stubs
    path = out / f"{the_plan.model_type}.py"
    path.write_text(adapter_source(the_plan))
    return path


@contextmanager
def without_family_fact(model_type: str) -> Iterator[None]:
    """Compose as for a day-zero model_type: the family's modelling-code facts (compose_knowledge.FAMILY_FACTS, as
    compose_rules reads them) left out within the block."""
    from onboard.generate_adapter import compose_rules

    facts = {name: value for name, value in compose_rules.FAMILY_FACTS.items() if name != model_type}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(compose_rules, "FAMILY_FACTS", facts)
        yield


def within_tolerance(report: dict) -> bool:
    """Parity's comparison passed: plainly, or "passed, low power" (onboard/generate_adapter/parity_power.py: a tiny
    random model's bfloat16 noise can hide the probe defects, so that pass is never a plain one). What the callers
    ask is whether the adapter agrees with the reference within its tolerance."""
    from onboard.generate_adapter.parity_power import LOW_POWER

    return report["status"] in ("passed", LOW_POWER)
