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


def check_padding_and_decoding(block: nn.Module, x: torch.Tensor, pad: int, prefix: int):  # noqa: ANN201
    """For a token mixer with the Attention signature: row 1 left-padded by `pad` tokens equals its real tokens alone,
    and a `prefix` forward then one token at a time through one LayerKV equals the whole sequence at once. Returns
    the cache (its states' shapes are the caller's to check)."""
    from onboard.blocks.attention import AttentionContext, LayerKV

    batch, seq = x.shape[:2]
    mask = torch.ones(batch, seq, dtype=torch.bool)
    mask[1, :pad] = False
    cache = LayerKV()
    with torch.no_grad():
        padded = block(x, None, None, AttentionContext(key_mask=mask))[1, pad:]
        torch.testing.assert_close(padded, block(x[1:, pad:], None, None)[0], atol=1e-6, rtol=1e-6)
        steps = [block(x[:, :prefix], None, None, AttentionContext(cache=cache))]
        steps += [block(x[:, t : t + 1], None, None, AttentionContext(cache=cache)) for t in range(prefix, seq)]
        torch.testing.assert_close(torch.cat(steps, dim=1), block(x, None, None), atol=1e-6, rtol=1e-6)
    return cache


def bfloat16_errors(ours: nn.Module, hf: nn.Module, exact: nn.Module, x: torch.Tensor) -> tuple[float, float]:
    """(our bfloat16 block's max error, transformers' bfloat16 block's max error), each against the float32 `exact`
    block on the same input. Comparing errors, not the two bfloat16 outputs, keeps a test independent of which
    kernels (and so which bfloat16 roundings) a CPU runs."""
    with torch.no_grad():
        reference = exact(x, None, None)
        ours_out = ours(x.to(torch.bfloat16), None, None).float()
        hf_out = hf(x.to(torch.bfloat16)).float()
    return float((ours_out - reference).abs().max()), float((hf_out - reference).abs().max())
