"""Shared launch helpers and Triton math for the element-wise kernels (swiglu, geglu, softcap)."""

from __future__ import annotations

import torch

from ._compat import next_pow2, tl, triton

# Columns per program: big blocks keep the grid small (the CPU interpreter costs ~1 ms per program instance).
MAX_BLOCK = 4096


@triton.jit
def tanh_f32(x):
    """tanh for float32 via exp(-2|x|) <= 1: never overflows (triton.language has no tanh)."""
    e = tl.exp(-2.0 * tl.abs(x))
    t = (1.0 - e) / (1.0 + e)
    return tl.where(x < 0, -t, t)


def as_rows(t: torch.Tensor) -> torch.Tensor:
    """View `t` as [rows, cols] with unit column stride, copying only when it must (e.g. a chunk of a fused tensor
    keeps its row stride and is not copied)."""
    t2 = t.reshape(-1, t.shape[-1]) if t.dim() != 2 else t
    return t2 if t2.stride(-1) == 1 else t2.contiguous()


def grid_and_block(rows: int, cols: int) -> tuple[tuple[int, int], int]:
    """2-D launch grid (rows, column blocks) and the column block size."""
    block = min(next_pow2(max(cols, 1)), MAX_BLOCK)
    return (rows, triton.cdiv(cols, block)), block


def check_same_shape(op: str, a: torch.Tensor, b: torch.Tensor) -> None:
    if a.shape != b.shape:
        raise ValueError(f"{op}: gate {tuple(a.shape)} and up {tuple(b.shape)} must have the same shape")
