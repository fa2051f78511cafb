"""Logit soft-capping: cap * tanh(x / cap) (Gemma 2 attention logits and final logits, Grok, ...)."""

from __future__ import annotations

import torch

from ._compat import require_triton, tl, triton
from ._elementwise import as_rows, grid_and_block, tanh_f32


@triton.jit
def _softcap_kernel(x_ptr, y_ptr, stride_x, stride_y, n_cols, cap, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    y = cap * tanh_f32(x / cap)
    tl.store(y_ptr + row * stride_y + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def _check_cap(cap: float) -> None:
    if not cap > 0:
        raise ValueError(f"softcap cap must be > 0, got {cap!r}")


def softcap_reference(x: torch.Tensor, cap: float) -> torch.Tensor:
    """PyTorch cap * tanh(x / cap), float32 internally, result in the input dtype."""
    _check_cap(cap)
    compute = torch.promote_types(x.dtype, torch.float32)
    return (cap * torch.tanh(x.to(compute) / cap)).to(x.dtype)


def softcap_triton(x: torch.Tensor, cap: float) -> torch.Tensor:
    """Triton cap * tanh(x / cap) over a tensor of any shape; same contract as `softcap_reference`."""
    require_triton("softcap")
    _check_cap(cap)
    if x.dim() == 0:
        return softcap_triton(x.reshape(1), cap).reshape(())
    x2 = as_rows(x)
    out = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    if out.numel() > 0:
        grid, block = grid_and_block(*x2.shape)
        _softcap_kernel[grid](x2, out, x2.stride(0), out.stride(0), x2.shape[1], float(cap), BLOCK=block)
    return out.reshape(x.shape)
