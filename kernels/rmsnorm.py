"""RMSNorm: y = x / sqrt(mean(x^2) + eps) * (offset + w).

Two published conventions differ only in where the result is rounded to the activation dtype:
- "llama" (offset 0; LlamaRMSNorm): normalise in float32, cast to the input dtype, *then* multiply by the weight.
- "gemma" (offset 1, i.e. (1 + w); GemmaRMSNorm): normalise and multiply in float32, cast once at the end.
Mixing them up is a classic bf16 parity bug, so the casting is explicit (default: llama for offset 0, gemma otherwise).
"""

from __future__ import annotations

import torch

from ._compat import next_pow2, require_triton, tl, triton

CASTINGS = ("llama", "gemma")


@triton.jit
def _rms_norm_kernel(
    x_ptr,
    w_ptr,
    y_ptr,
    stride_x,
    stride_y,
    n_cols,
    eps,
    offset,
    GEMMA_CAST: tl.constexpr,
    BLOCK: tl.constexpr,
):
    # One program per row; the whole row fits one block (hidden sizes are at most a few 10k).
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    # Upcast in-kernel: bf16 arithmetic is not reliable under the interpreter and loses precision on GPU.
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    y = x * rstd
    if not GEMMA_CAST:
        # Llama rounds the normalised activations to the input dtype before the weight multiply.
        y = y.to(x_ptr.dtype.element_ty).to(tl.float32)
    out = y * (w + offset)
    tl.store(y_ptr + row * stride_y + cols, out.to(y_ptr.dtype.element_ty), mask=mask)


def _resolve_casting(offset: float, casting: str | None) -> str:
    if casting is None:
        return "llama" if offset == 0.0 else "gemma"
    if casting not in CASTINGS:
        raise ValueError(f"rms_norm casting must be one of {CASTINGS}, got {casting!r}")
    return casting


def _out_dtype(x: torch.Tensor, weight: torch.Tensor, casting: str) -> torch.dtype:
    # Llama multiplies `weight * x.to(input_dtype)`: torch type promotion decides; Gemma casts back to x's dtype.
    return torch.result_type(weight, x) if casting == "llama" else x.dtype


def rms_norm_reference(
    x: torch.Tensor, weight: torch.Tensor, eps: float, offset: float = 0.0, casting: str | None = None
) -> torch.Tensor:
    """PyTorch RMSNorm over the last dim, float32 internally (float64 inputs stay float64), HF casting semantics."""
    casting = _resolve_casting(offset, casting)
    compute = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(compute)
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    if casting == "llama":
        return (weight + offset) * y.to(x.dtype) if offset else weight * y.to(x.dtype)
    return (y * (offset + weight.to(compute))).to(x.dtype)


def rms_norm_triton(
    x: torch.Tensor, weight: torch.Tensor, eps: float, offset: float = 0.0, casting: str | None = None
) -> torch.Tensor:
    """Triton RMSNorm over the last dim of `x` (any leading shape); same semantics as `rms_norm_reference`."""
    require_triton("rms_norm")
    casting = _resolve_casting(offset, casting)
    n = x.shape[-1]
    if weight.shape != (n,):
        raise ValueError(f"rms_norm weight has shape {tuple(weight.shape)}, expected ({n},)")
    x2 = x.reshape(-1, n)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    out = torch.empty(x2.shape, dtype=_out_dtype(x, weight, casting), device=x.device)
    if x2.shape[0] > 0:
        _rms_norm_kernel[(x2.shape[0],)](
            x2,
            weight.contiguous(),
            out,
            x2.stride(0),
            out.stride(0),
            n,
            float(eps),
            float(offset),
            GEMMA_CAST=casting == "gemma",
            BLOCK=next_pow2(n),
        )
    return out.reshape(x.shape)
