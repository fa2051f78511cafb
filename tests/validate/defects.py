"""Seeded defects: each a modified copy (config edit, weight edit) or a wrapped model, and the check that must fail.

Every defect is validated against the clean checkpoint's goldens, as a broken port would be.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.validate.tiny_models import WINDOW, edit_config, edit_weights


@dataclass(frozen=True)
class Defect:
    name: str
    model: str
    """Which tiny checkpoint (clean goldens) it breaks."""
    check: str
    """The check that names it and must fail."""
    copy: Callable[[Path, Path], Path] | None = None
    wrap: Callable[[Any], Any] | None = None
    dtype: str = "float32"


def _scale_head(t: dict) -> dict:
    t["lm_head.weight"] = t["lm_head.weight"] * 10.0
    return t


def _norm_offset_lost(t: dict) -> dict:
    # The Gemma norm computes x * (1 + w); storing w - 1 makes the correct code compute x * w: the lost offset.
    return {k: (v - 1.0 if k.endswith("norm.weight") else v) for k, v in t.items()}


def _untie_random(t: dict) -> dict:
    import torch

    gen = torch.Generator().manual_seed(1234)
    emb = t["model.embed_tokens.weight"]
    t["lm_head.weight"] = torch.randn(emb.shape, generator=gen) * float(emb.std())
    return t


def _no_embed_scale(model: Any) -> Any:
    """Works on transformers (embed_scale buffer) and on generated adapters (Embedding.scale)."""
    emb = model.model.embed_tokens
    if hasattr(emb, "embed_scale"):
        emb.embed_scale.fill_(1.0)
    else:
        emb.scale = None
    return model


def _no_qk_norm(model: Any) -> Any:
    import torch

    hf = hasattr(model, "config")
    for layer in model.model.layers:
        # transformers calls the norms unconditionally (Identity skips them); the adapter skips a None norm.
        layer.self_attn.q_norm = torch.nn.Identity() if hf else None
        layer.self_attn.k_norm = torch.nn.Identity() if hf else None
    return model


def _batch_dependent(model: Any) -> Any:
    """Logits shift with batch size, as a split-K or padding-dependent kernel would."""

    def hook(_module: Any, _inputs: Any, output: Any) -> Any:
        if output.shape[0] == 1:
            return output
        import torch

        gen = torch.Generator().manual_seed(output.shape[0])
        return output + 0.2 * torch.randn(output.shape[-1], generator=gen)

    model.lm_head.register_forward_hook(hook)
    return model


DEFECTS: tuple[Defect, ...] = (
    Defect("logits_x10", "llama", "logit_scale", copy=lambda s, d: edit_weights(s, d, _scale_head)),
    Defect("softcap_removed", "gemma2", "logit_parity",
           copy=lambda s, d: edit_config(s, d, final_logit_softcapping=None, attn_logit_softcapping=None)),
    Defect("rmsnorm_offset_lost", "gemma2", "logit_parity", copy=lambda s, d: edit_weights(s, d, _norm_offset_lost)),
    Defect("exact_gelu", "gemma2", "logit_parity",
           copy=lambda s, d: edit_config(s, d, hidden_activation="gelu", hidden_act="gelu")),
    Defect("embedding_scale_lost", "gemma2", "logit_parity", wrap=_no_embed_scale),
    Defect("rope_scaling_removed", "llama", "long_context_parity",
           copy=lambda s, d: edit_config(s, d, rope_parameters={"rope_type": "default", "rope_theta": 10000.0})),
    Defect("sliding_window_off_by_one", "gemma2", "long_context_parity",
           copy=lambda s, d: edit_config(s, d, sliding_window=WINDOW - 1)),
    Defect("qk_norm_missing", "qwen3", "logit_parity", wrap=_no_qk_norm),
    Defect("lm_head_untied_random", "qwen3", "logit_parity",
           copy=lambda s, d: edit_weights(edit_config(s, d, tie_word_embeddings=False), d, _untie_random)),
    Defect("moe_routing_norm_flipped", "qwen3_moe", "logit_parity", copy=lambda s, d: edit_config(s, d, norm_topk_prob=False)),
    Defect("batch_dependent_output", "qwen3", "determinism_batch", wrap=_batch_dependent),
    Defect("fp16_overflow", "llama_hot", "fp16_overflow", dtype="float16"),
)  # fmt: skip
