"""Sharpened random checkpoints: the tiny validate families with weights rescaled to a real model's magnitudes.

Random tiny checkpoints have near-uniform outputs, so a defect that moves large logits (a dropped soft-cap) or small
activations (rms_norm_eps) barely shows on them. Here, per family: the embedding rows are shrunk to a real model's
scale where the head is untied (std ~0.02: eps then matters as in a real checkpoint, whose first residual stream is
that small), the output head is scaled until next-token distributions are peaked, attention scores are sharpened
with tests/divergence's `sharpen` (q and k projections), and soft-caps are set where the sharpened logits reach them
(Gemma 2's own 50/30 are reached by its large logits; the tiny config's 2/3 would flatten everything).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.divergence.conftest import sharpen
from tests.validate.tiny_models import build, edit_weights

ATTENTION = 1.25  # q and k x1.25: attention scores x1.56, std ~4 -> ~6 on these configs
# kind -> (config overrides, {tensor name suffix: factor})
SHARPENING: dict[str, tuple[dict[str, Any], dict[str, float]]] = {
    "llama": ({"rms_norm_eps": 1e-6}, {"model.embed_tokens.weight": 0.08, "lm_head.weight": 2.0}),
    # Many small experts, as real MoE (Qwen3-30B-A3B: 128, top-8): a routing flip at the top-k boundary then moves a
    # small weight, not half the MLP output (4 experts, top-2: ~5% of positions flip in bf16, by up to 4 nats).
    "qwen3_moe": (
        {"rms_norm_eps": 1e-6, "num_experts": 16, "num_experts_per_tok": 4, "moe_intermediate_size": 32},
        {"model.embed_tokens.weight": 0.08, "lm_head.weight": 2.0},
    ),
    # Tied head: the embedding is the head (its input is scaled by sqrt(hidden) and normed, so its size is free).
    "gemma2": ({"final_logit_softcapping": 15.0, "attn_logit_softcapping": 10.0}, {"model.embed_tokens.weight": 2.5}),
}


def build_sharpened(kind: str, out: Path, seed: int = 0) -> Path:
    """A tiny `kind` checkpoint (tests/validate/tiny_models.py) with SHARPENING applied."""
    overrides, factors = SHARPENING[kind]
    path = build(kind, out, seed=seed, overrides=overrides)

    def scale(tensors: dict[str, Any]) -> dict[str, Any]:
        return {k: v * next((f for s, f in factors.items() if k.endswith(s)), 1.0) for k, v in tensors.items()}

    def bf16_release(tensors: dict[str, Any]) -> dict[str, Any]:
        import torch

        return {k: v.to(torch.bfloat16).float() for k, v in tensors.items()}

    sharpen(edit_weights(path, path, scale), ATTENTION)
    # Stored as a bfloat16 release would be: serving it in bf16 (or fp16) then rounds activations, not weights. Random
    # float32 weights rounded at load add a noise no real bf16 checkpoint has, 10x the activations' in these nets.
    return edit_weights(path, path, bf16_release)
