"""GeGLU activation: gelu(gate) * up, with the tanh approximation (Gemma's `gelu_pytorch_tanh`) or exact erf GELU.

gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)));  gelu(x) = 0.5 x (1 + erf(x / sqrt(2))).
"""

from __future__ import annotations

import math

import torch

from ._compat import require_triton, tl, triton
from ._elementwise import as_rows, check_same_shape, grid_and_block, tanh_f32

APPROXIMATIONS = ("tanh", "none")
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)


@triton.jit
def _geglu_kernel(g_ptr, u_ptr, y_ptr, stride_g, stride_u, stride_y, n_cols, TANH: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    g = tl.load(g_ptr + row * stride_g + cols, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(u_ptr + row * stride_u + cols, mask=mask, other=0.0).to(tl.float32)
    if TANH:
        inner = 0.7978845608028654 * (g + 0.044715 * g * g * g)
        act = 0.5 * g * (1.0 + tanh_f32(inner))
    else:
        act = 0.5 * g * (1.0 + tl.math.erf(g * 0.7071067811865476))
    tl.store(y_ptr + row * stride_y + cols, (act * u).to(y_ptr.dtype.element_ty), mask=mask)


def _check_approximate(approximate: str) -> None:
    if approximate not in APPROXIMATIONS:
        raise ValueError(f"geglu approximate must be one of {APPROXIMATIONS}, got {approximate!r}")


def geglu_reference(gate: torch.Tensor, up: torch.Tensor, approximate: str = "tanh") -> torch.Tensor:
    """PyTorch gelu(gate) * up written from the formula (not F.gelu), float32 internally, result in input dtype."""
    check_same_shape("geglu", gate, up)
    _check_approximate(approximate)
    compute = torch.promote_types(gate.dtype, torch.float32)
    g = gate.to(compute)
    if approximate == "tanh":
        act = 0.5 * g * (1.0 + torch.tanh(_SQRT_2_OVER_PI * (g + 0.044715 * g.pow(3))))
    else:
        act = 0.5 * g * (1.0 + torch.erf(g * _INV_SQRT_2))
    return (act * up.to(compute)).to(gate.dtype)


def geglu_triton(gate: torch.Tensor, up: torch.Tensor, approximate: str = "tanh") -> torch.Tensor:
    """Triton gelu(gate) * up; same contract as `geglu_reference`."""
    require_triton("geglu")
    check_same_shape("geglu", gate, up)
    _check_approximate(approximate)
    g2, u2 = as_rows(gate), as_rows(up)
    out = torch.empty(g2.shape, dtype=gate.dtype, device=gate.device)
    if out.numel() > 0:
        grid, block = grid_and_block(*g2.shape)
        _geglu_kernel[grid](
            g2, u2, out, g2.stride(0), u2.stride(0), out.stride(0), g2.shape[1], TANH=approximate == "tanh", BLOCK=block
        )
    return out.reshape(gate.shape)
