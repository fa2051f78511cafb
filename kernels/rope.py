"""Rotary position embedding applied to one tensor of heads: x [..., H, D] with cos/sin [..., R/2].

R = 2 * cos.shape[-1] is the rotary dim: only x[..., :R] is rotated (partial rotary, e.g. phi, stablelm, glm), the
rest passes through. cos/sin hold one value per rotated *pair* (the half table, as in vLLM), not HF's duplicated
[..., R] table. Two pair layouts exist:
- half-split / "neox" (Llama & most HF models): pairs are (x[i], x[i + R/2]);
- interleaved / GPT-J style: pairs are (x[2i], x[2i + 1]); the output keeps the interleaved order.
Each pair (a, b) becomes (a*cos - b*sin, b*cos + a*sin).
"""

from __future__ import annotations

import torch

from ._compat import next_pow2, require_triton, tl, triton


@triton.jit
def _rope_kernel(
    x_ptr,
    cos_ptr,
    sin_ptr,
    y_ptr,
    stride_xt,
    stride_xh,
    stride_yt,
    stride_yh,
    stride_ct,
    stride_st,
    n_heads,
    head_dim,
    HALF: tl.constexpr,
    INTERLEAVED: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_HALF: tl.constexpr,
    BLOCK_PASS: tl.constexpr,
):
    # One program per token, all its heads at once: cos/sin are loaded once and reused across heads.
    t = tl.program_id(0).to(tl.int64)
    h = tl.arange(0, BLOCK_H)[:, None]
    j = tl.arange(0, BLOCK_HALF)[None, :]
    mask = (h < n_heads) & (j < HALF)
    c = tl.load(cos_ptr + t * stride_ct + j, mask=j < HALF, other=0.0).to(tl.float32)
    s = tl.load(sin_ptr + t * stride_st + j, mask=j < HALF, other=0.0).to(tl.float32)
    if INTERLEAVED:
        i1 = 2 * j
        i2 = 2 * j + 1
    else:
        i1 = j
        i2 = j + HALF
    x_row = x_ptr + t * stride_xt + h * stride_xh
    y_row = y_ptr + t * stride_yt + h * stride_yh
    a = tl.load(x_row + i1, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(x_row + i2, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_row + i1, (a * c - b * s).to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(y_row + i2, (b * c + a * s).to(y_ptr.dtype.element_ty), mask=mask)
    if BLOCK_PASS > 0:
        # Partial rotary: dims [2*HALF, head_dim) are copied unchanged.
        p = 2 * HALF + tl.arange(0, BLOCK_PASS)[None, :]
        pmask = (h < n_heads) & (p < head_dim)
        tl.store(y_row + p, tl.load(x_row + p, mask=pmask, other=0.0), mask=pmask)


def _check(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> int:
    if x.dim() < 2:
        raise ValueError(f"rope expects x of shape [..., heads, head_dim], got {tuple(x.shape)}")
    if cos.shape != sin.shape:
        raise ValueError(f"rope cos {tuple(cos.shape)} and sin {tuple(sin.shape)} differ in shape")
    half = cos.shape[-1]
    if 2 * half > x.shape[-1]:
        raise ValueError(f"rope rotary dim {2 * half} exceeds head_dim {x.shape[-1]}")
    return half


def rope_reference(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool = False) -> torch.Tensor:
    """PyTorch RoPE: x [..., H, D], cos/sin [..., R/2] (broadcast over heads); float32 internally."""
    half = _check(x, cos, sin)
    compute = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(compute)
    c = cos.to(compute).unsqueeze(-2)
    s = sin.to(compute).unsqueeze(-2)
    rot, rest = xf[..., : 2 * half], xf[..., 2 * half :]
    if interleaved:
        a, b = rot[..., 0::2], rot[..., 1::2]
    else:
        a, b = rot[..., :half], rot[..., half:]
    o1, o2 = a * c - b * s, b * c + a * s
    out = torch.stack((o1, o2), dim=-1).flatten(-2) if interleaved else torch.cat((o1, o2), dim=-1)
    return torch.cat((out, rest), dim=-1).to(x.dtype)


def rope_triton(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool = False) -> torch.Tensor:
    """Triton RoPE, out of place; same contract as `rope_reference` (cos/sin may broadcast over leading dims)."""
    require_triton("rope")
    half = _check(x, cos, sin)
    n_heads, head_dim = x.shape[-2], x.shape[-1]
    lead = x.shape[:-2]
    x3 = x.reshape(-1, n_heads, head_dim)
    if x3.stride(-1) != 1:
        x3 = x3.contiguous()
    cos2 = cos.expand(*lead, half).reshape(-1, half).contiguous()
    sin2 = sin.expand(*lead, half).reshape(-1, half).contiguous()
    out = torch.empty(x3.shape, dtype=x.dtype, device=x.device)
    n_pass = head_dim - 2 * half
    if x3.shape[0] > 0:
        _rope_kernel[(x3.shape[0],)](
            x3,
            cos2,
            sin2,
            out,
            x3.stride(0),
            x3.stride(1),
            out.stride(0),
            out.stride(1),
            cos2.stride(0),
            sin2.stride(0),
            n_heads,
            head_dim,
            HALF=half,
            INTERLEAVED=interleaved,
            BLOCK_H=next_pow2(n_heads),
            BLOCK_HALF=next_pow2(max(half, 1)),
            BLOCK_PASS=next_pow2(n_pass) if n_pass > 0 else 0,
        )
    return out.reshape(x.shape)
