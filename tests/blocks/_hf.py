"""Helpers for comparing blocks with transformers modules: eager HF configs, HF's own masks, weight copying."""

from __future__ import annotations

import torch
from torch import nn


def eager(config):
    """The config with eager attention (the reference implementation every other backend is checked against)."""
    config._attn_implementation = "eager"
    return config


def hf_mask(config, x: torch.Tensor, sliding: bool) -> torch.Tensor:
    """transformers' own 4-D additive mask for a full-prefix forward (sliding or full causal)."""
    from transformers.masking_utils import create_causal_mask, create_sliding_window_causal_mask

    make = create_sliding_window_causal_mask if sliding else create_causal_mask
    pos = torch.arange(x.shape[1])[None].expand(x.shape[0], -1)
    return make(config, x, None, None, position_ids=pos, allow_is_causal_skip=False)


def randomize(module: nn.Module, seed: int = 0, std: float = 0.2) -> None:
    """Fill every parameter with seeded noise (HF init leaves some at 0/1, which would hide mistakes)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * std)


def fuse_linear(dst: nn.Linear, *srcs: nn.Linear) -> None:
    """dst.weight/bias = row-wise concatenation of srcs (fused qkv_proj / gate_up_proj)."""
    with torch.no_grad():
        dst.weight.copy_(torch.cat([s.weight for s in srcs], dim=0))
        if dst.bias is not None:
            dst.bias.copy_(torch.cat([s.bias for s in srcs], dim=0))


def copy_linear(dst: nn.Linear, src: nn.Linear) -> None:
    fuse_linear(dst, src)


def full_table(half: torch.Tensor, interleaved: bool = False) -> torch.Tensor:
    """HF's duplicated cos/sin table from our half table: cat (llama) or repeat_interleave (cohere)."""
    return half.repeat_interleave(2, dim=-1) if interleaved else torch.cat((half, half), dim=-1)
