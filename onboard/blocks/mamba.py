"""Mamba (Mamba-1), the selective state-space token mixer of Mamba, Falcon-Mamba and Jamba: a state of `state_size`
per channel. `in_proj` gives [x; z]; x runs through a causal depthwise convolution and SiLU, then `x_proj` gives
[dt; B; C] (optionally RMS-normalised each). With dt = softplus(dt_proj(dt)) and A = -exp(A_log):

    h <- exp(A dt) h + dt B x  (float32);  y = h C (in the activations' dtype) + D x;  y = y silu(z)

as transformers' sequential mamba_selective_scan.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .attention import AttentionContext
from .conv import causal_conv
from .norms import rms_normalize


class MambaMixer(nn.Module):
    """forward(x [B, S, hidden], cos, sin, ctx) -> [B, S, hidden], the signature of Attention (cos / sin unused).

    `bc_norm`: None, "weightless" (Falcon-Mamba's mixer_rms_eps norms) or "weighted" (Jamba's)."""

    def __init__(
        self,
        hidden_size: int,
        intermediate_size: int,
        state_size: int,
        dt_rank: int,
        conv_kernel: int,
        *,
        conv_bias: bool = True,
        proj_bias: bool = False,
        activation: str = "silu",
        bc_norm: str | None = None,
        norm_eps: float = 1e-6,
    ) -> None:
        super().__init__()
        if activation not in ("silu", "swish"):
            raise ValueError(f"MambaMixer: the convolution's activation {activation!r} is not SiLU")
        if bc_norm not in (None, "weightless", "weighted"):
            raise ValueError(f"MambaMixer: bc_norm {bc_norm!r} is not None, 'weightless' or 'weighted'")
        self.intermediate, self.state, self.dt_rank = intermediate_size, state_size, dt_rank
        self.bc_norm, self.norm_eps = bc_norm, norm_eps
        self.in_proj = nn.Linear(hidden_size, 2 * intermediate_size, bias=proj_bias)
        self.conv1d = nn.Conv1d(
            intermediate_size, intermediate_size, conv_kernel, groups=intermediate_size, bias=conv_bias
        )
        self.x_proj = nn.Linear(intermediate_size, dt_rank + 2 * state_size, bias=False)
        self.dt_proj = nn.Linear(dt_rank, intermediate_size, bias=True)
        self.A_log = nn.Parameter(torch.zeros(intermediate_size, state_size))
        self.D = nn.Parameter(torch.ones(intermediate_size))
        self.out_proj = nn.Linear(intermediate_size, hidden_size, bias=proj_bias)
        if bc_norm == "weighted":
            for name, size in (("dt_layernorm", dt_rank), ("b_layernorm", state_size), ("c_layernorm", state_size)):
                norm = nn.Module()
                norm.weight = nn.Parameter(torch.ones(size))
                setattr(self, name, norm)

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor | None, sin: torch.Tensor | None, ctx: AttentionContext | None = None
    ) -> torch.Tensor:
        ctx = ctx or AttentionContext()
        s, dtype = x.shape[1], x.dtype
        mask = ctx.key_mask[:, -s:, None] if ctx.key_mask is not None else None
        if mask is not None:  # padding zeroed first, as transformers does: the state then stays at zero through it
            x = (x * mask).to(dtype)
        xs, z = self.in_proj(x).chunk(2, dim=-1)
        xs = F.silu(causal_conv(xs.transpose(1, 2), self.conv1d, ctx)).transpose(1, 2)
        if mask is not None:
            xs = (xs * mask).to(dtype)
        dt, B, C = self.x_proj(xs).split([self.dt_rank, self.state, self.state], dim=-1)
        if self.bc_norm is not None:
            dt, B, C = (
                self._norm(t, name) for t, name in ((dt, "dt_layernorm"), (B, "b_layernorm"), (C, "c_layernorm"))
            )
        dt = F.linear(dt, self.dt_proj.weight)
        dt = F.softplus(dt + self.dt_proj.bias.float().to(dt.dtype))  # in the activations' dtype, as transformers
        state = ctx.cache.recurrent_state if ctx.cache is not None else None
        y, state = _scan(xs, dt, -self.A_log.float().exp(), B, C, state)
        if ctx.cache is not None:
            ctx.cache.recurrent_state = state
        y = (y + xs * self.D.float()) * F.silu(z)
        return self.out_proj(y.to(dtype))

    def _norm(self, t: torch.Tensor, name: str) -> torch.Tensor:
        """RMS over the last dim in float32 (Falcon-Mamba's weightless norm), times Jamba's weight when it has one."""
        normed = rms_normalize(t, self.norm_eps)
        return normed if self.bc_norm == "weightless" else getattr(self, name).weight * normed


def _scan(
    x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor, state: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """x, dt [B, S, I], A [I, N] (float32), B, C [B, S, N]; state [B, I, N] or None (zeros). Returns (y = h C
    [B, S, I] in x's dtype, the state after the last token, float32)."""
    b, s, i = x.shape
    state = x.new_zeros(b, i, A.shape[-1], dtype=torch.float32) if state is None else state.float()
    xf, bf = x.float(), B.float()
    ys = []
    for t in range(s):
        decay = torch.exp(A[None] * dt[:, t, :, None])  # float32 (A is), whatever dt's dtype
        state = decay * state + (dt[:, t, :, None] * bf[:, t, None, :]) * xf[:, t, :, None]
        ys.append(torch.matmul(state.to(x.dtype), C[:, t, :, None])[..., 0])
    return torch.stack(ys, dim=1), state
