"""Sharpened tiny checkpoints and seeded adapter copies for the first-divergence tests.

Random tiny checkpoints have near-uniform attention (scores ~0.2): a dropped soft-cap, a wrong rope base or a missing
QK-norm then changes almost nothing. `sharpen` scales q/k projections so attention scores reach trained-like
magnitudes (tens), on top of tests/generate's seeded perturbation (norm weights away from their init).

A seeded defect edits a COPY of a committed adapter (never adapters/ itself); each edit must match exactly once,
so a template change fails here loudly instead of silently testing an unmodified adapter.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from onboard.generate_adapter.regenerate import ADAPTERS_DIR
from tests.validate.conftest import _one_torch_thread  # noqa: F401  (autouse: one torch thread per test module)

# q and k are each multiplied by this: scores by its square (0.2 -> ~13 on the tiny configs).
SHARPEN = 8.0


def sharpen(checkpoint: Path, factor: float = SHARPEN) -> None:
    """Scale every q/k projection weight (separate or fused) in checkpoint/model.safetensors by `factor`."""
    from safetensors.torch import load_file, save_file

    file = checkpoint / "model.safetensors"
    tensors = load_file(str(file))
    # Fused qkv (phi3) scales v too: the attention output grows, the sharpening of q·k is what matters.
    sharp = (".q_proj.weight", ".k_proj.weight", ".q_b_proj.weight", ".kv_a_proj_with_mqa.weight", ".qkv_proj.weight")
    out = {n: (t.float() * factor).to(t.dtype) if n.endswith(sharp) else t for n, t in tensors.items()}
    assert any(n.endswith(sharp) for n in tensors), f"{checkpoint}: no q/k projection to sharpen"
    save_file(out, str(file), metadata={"format": "pt"})


class SharpCheckpoints:
    """model_type -> tests/generate's perturbed tiny checkpoint, sharpened once, kept for the session."""

    def __init__(self, root: Path) -> None:
        from tests.generate.conftest import TinyCheckpoints

        self.tiny = TinyCheckpoints(root)
        self._sharpened: set[Path] = set()

    def __call__(self, model_type: str, dtype: str = "float32") -> Path:
        path = self.tiny(model_type, dtype)
        if path not in self._sharpened:
            sharpen(path)
            self._sharpened.add(path)
        return path


@pytest.fixture(scope="session")
def sharp(tmp_path_factory: pytest.TempPathFactory) -> SharpCheckpoints:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    return SharpCheckpoints(tmp_path_factory.mktemp("tiny-divergence"))


def seed_adapter(folder: Path, model_type: str, edits: list[tuple[str, str]]) -> Path:
    """Copy adapters/<model_type>.py to folder/adapters/ with each (old, new) edit applied exactly once."""
    text = (ADAPTERS_DIR / f"{model_type}.py").read_text()
    for old, new in edits:
        assert text.count(old) == 1, f"seeded edit no longer matches adapters/{model_type}.py exactly once: {old!r}"
        text = text.replace(old, new)
    out = folder / "adapters" / f"{model_type}.py"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return out


# Adapter-side defects: model_type -> edits. Expected localisation is in test_seeded_defects.py.
DEFECTS: dict[str, list[tuple[str, str]]] = {
    # Gemma's RMSNorm scales by (1 + w); the defect scales by w.
    "norm_offset": [("RMSNorm(dim, args.rms_norm_eps, offset=1.0)", "RMSNorm(dim, args.rms_norm_eps)")],
    # Rope base x100 (10000 -> 1e6): what a config read from the wrong key looks like.
    "rope_theta": [
        (
            "    def __post_init__(self) -> None:\n",
            "    def __post_init__(self) -> None:\n"
            "        rope = dict(self.rope_parameters or {})\n"
            '        self.rope_parameters = rope | {"rope_theta": 100 * rope.get("rope_theta", 10000.0)}\n',
        )
    ],
    # No QK-norm: the attention block drops it, the loader is told to leave its weights unused.
    "qk_norm": [
        ("            qk_norm=QKNormSpec(args.rms_norm_eps),\n", ""),
        ("DROPPED: tuple[str, ...] = (", 'DROPPED: tuple[str, ...] = (r".*self_attn\\.[qk]_norm\\.weight", '),
    ],
    # Gemma 2's attention logit soft-cap dropped.
    "softcap": [("softcap=args.attn_logit_softcapping,", "softcap=None,")],
    # MoE: the top-k weights renormalised when the config says not to (router logits still agree).
    "topk_norm": [("norm_topk_prob=args.norm_topk_prob)", "norm_topk_prob=not args.norm_topk_prob)")],
}
DEFECT_FAMILY = {
    "norm_offset": "gemma",
    "rope_theta": "llama",
    "qk_norm": "qwen3",
    "softcap": "gemma2",
    "topk_norm": "qwen3_moe",
}


@pytest.fixture
def seeded(tmp_path: Path) -> Callable[[str], Path]:
    """defect name -> path of the seeded adapter copy."""
    return lambda defect: seed_adapter(tmp_path, DEFECT_FAMILY[defect], DEFECTS[defect])
