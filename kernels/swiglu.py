"""SwiGLU activation: silu(gate) * up (Llama/Mistral/Qwen MLPs and most MoE experts).

`gate` and `up` may be the two halves of a fused gate_up projection (`gate_up.chunk(2, -1)`): the kernel takes row
strides, so such views are not copied.
"""

from __future__ import annotations

import torch

from ._compat import require_triton, tl, triton
from ._elementwise import as_rows, check_same_shape, grid_and_block


@triton.jit
def _swiglu_kernel(g_ptr, u_ptr, y_ptr, stride_g, stride_u, stride_y, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    g = tl.load(g_ptr + row * stride_g + cols, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(u_ptr + row * stride_u + cols, mask=mask, other=0.0).to(tl.float32)
    y = g * tl.sigmoid(g) * u
    tl.store(y_ptr + row * stride_y + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def swiglu_reference(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """PyTorch silu(gate) * up, float32 internally, result in the input dtype."""
    check_same_shape("swiglu", gate, up)
    compute = torch.promote_types(gate.dtype, torch.float32)
    g = gate.to(compute)
    return (g * torch.sigmoid(g) * up.to(compute)).to(gate.dtype)


def swiglu_triton(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """Triton silu(gate) * up; same contract as `swiglu_reference`."""
    require_triton("swiglu")
    check_same_shape("swiglu", gate, up)
    g2, u2 = as_rows(gate), as_rows(up)
    out = torch.empty(g2.shape, dtype=gate.dtype, device=gate.device)
    if out.numel() > 0:
        grid, block = grid_and_block(*g2.shape)
        _swiglu_kernel[grid](g2, u2, out, g2.stride(0), u2.stride(0), out.stride(0), g2.shape[1], BLOCK=block)
    return out.reshape(gate.shape)
