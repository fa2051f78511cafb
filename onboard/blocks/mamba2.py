"""Mamba-2, the state-space token mixer of the hybrid families (Bamba, Granite-4.0, Falcon-H1): a fixed-size state
per head instead of a growing KV cache.

Per layer: `in_proj` gives [z (the gate, intermediate); xBC (intermediate + 2 n_groups state); dt (one per head)].
xBC runs through a causal depthwise convolution and SiLU and splits into x (heads x head_dim), B and C (n_groups x
state, each group serving heads / n_groups consecutive heads). With dt = clamp(softplus(dt + dt_bias)) and
A = -exp(A_log), in float32:

    h <- h * exp(A dt) + dt (x B^T);  y = h C + D x

then y is gated by silu(z), RMS-normalised per group of intermediate / n_groups channels (weight `norm.weight`) and
`out_proj` maps it back. The same recurrence as transformers' mamba2 selective-state update, token by token (its
chunked scan, the SSD form, is a faster ordering of the same sums).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .attention import AttentionContext
from .conv import causal_conv
from .norms import rms_normalize


class Mamba2Mixer(nn.Module):
    """forward(x [B, S, hidden], cos, sin, ctx) -> [B, S, hidden], the signature of Attention (cos / sin unused)."""

    def __init__(
        self,
        hidden_size: int,
        num_heads: int,
        head_dim: int,
        state_size: int,
        n_groups: int,
        conv_kernel: int,
        *,
        conv_bias: bool = True,
        proj_bias: bool = False,
        norm_eps: float = 1e-6,
        activation: str = "silu",
        time_step_limit: tuple[float, float] | list[float] | None = None,
        gated_norm: bool = True,
        norm_before_gate: bool = False,
        in_multiplier: float = 1.0,
        zxbcdt_multipliers: tuple[float, ...] | list[float] | None = None,
        out_bias: bool | None = None,
    ) -> None:
        super().__init__()
        if num_heads % n_groups:
            raise ValueError(f"Mamba2Mixer: {num_heads} heads do not group over {n_groups} B/C groups")
        if activation not in ("silu", "swish"):
            raise ValueError(f"Mamba2Mixer: the convolution's activation {activation!r} is not SiLU")
        self.heads, self.head_dim, self.state = num_heads, head_dim, state_size
        self.groups, self.kernel = n_groups, conv_kernel
        self.intermediate = num_heads * head_dim
        self.conv_dim = self.intermediate + 2 * n_groups * state_size
        self.norm_eps = norm_eps
        low, high = time_step_limit if time_step_limit is not None else (0.0, float("inf"))
        self.time_step_limit = (float(low), float(high))
        self.in_proj = nn.Linear(hidden_size, self.intermediate + self.conv_dim + num_heads, bias=proj_bias)
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, conv_kernel, groups=self.conv_dim, bias=conv_bias)
        self.dt_bias = nn.Parameter(torch.ones(num_heads))
        self.A_log = nn.Parameter(torch.zeros(num_heads))
        self.D = nn.Parameter(torch.ones(num_heads))
        self.gated_norm, self.norm_before_gate, self.in_multiplier = gated_norm, norm_before_gate, float(in_multiplier)
        self.zxbcdt_multipliers = tuple(float(m) for m in zxbcdt_multipliers) if zxbcdt_multipliers else None
        if self.zxbcdt_multipliers is not None and len(self.zxbcdt_multipliers) != 5:
            raise ValueError("Mamba2Mixer: zxbcdt_multipliers are five numbers, for z, x, B, C and dt")
        if gated_norm:
            self.norm = nn.Module()
            self.norm.weight = nn.Parameter(torch.ones(self.intermediate))
        self.out_proj = nn.Linear(self.intermediate, hidden_size, bias=proj_bias if out_bias is None else out_bias)

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor | None, sin: torch.Tensor | None, ctx: AttentionContext | None = None
    ) -> torch.Tensor:
        ctx = ctx or AttentionContext()
        b, s, _ = x.shape
        dtype = x.dtype
        mask = ctx.key_mask[:, -s:, None] if ctx.key_mask is not None else None
        if mask is not None:  # padding zeroed first, as transformers does: the state then stays at zero through it
            x = (x * mask).to(dtype)
        if self.in_multiplier != 1.0:  # Falcon-H1's ssm_in_multiplier
            x = x * self.in_multiplier
        projected = self.in_proj(x)
        if self.zxbcdt_multipliers is not None:  # Falcon-H1's muP vector, in the activations' dtype as its buffer
            projected = projected * self._mup_vector(projected)
        z, xbc, dt = projected.split([self.intermediate, self.conv_dim, self.heads], dim=-1)
        xbc = F.silu(causal_conv(xbc.transpose(1, 2), self.conv1d, ctx)).transpose(1, 2)
        if mask is not None:
            xbc = (xbc * mask).to(dtype)
        xs, B, C = xbc.split([self.intermediate, self.groups * self.state, self.groups * self.state], dim=-1)
        # In the activations' dtype, as transformers does, then float32 for the scan.
        dt = F.softplus(dt + self.dt_bias.to(dt.dtype)).clamp(*self.time_step_limit)
        state = ctx.cache.recurrent_state if ctx.cache is not None else None
        y, state = _scan(
            xs.reshape(b, s, self.heads, self.head_dim),
            dt,
            -self.A_log.float().exp(),
            B.reshape(b, s, self.groups, self.state),
            C.reshape(b, s, self.groups, self.state),
            self.D,
            state,
        )
        if ctx.cache is not None:
            ctx.cache.recurrent_state = state
        y = y.reshape(b, s, self.intermediate)
        if not self.gated_norm:  # Falcon-H1 without mamba_rms_norm: gated, not normalised
            return self.out_proj((y * F.silu(z.float())).to(dtype))
        return self.out_proj(self._gated_norm(y, z).to(dtype))

    def _mup_vector(self, projected: torch.Tensor) -> torch.Tensor:
        """One multiplier per in_proj output: z, x, B, C, dt parts (transformers' compute_mup_vector)."""
        sizes = (self.intermediate, self.intermediate, self.groups * self.state, self.groups * self.state, self.heads)
        parts = [torch.full((n,), m) for n, m in zip(sizes, self.zxbcdt_multipliers, strict=True)]  # type: ignore[arg-type]
        return torch.cat(parts).to(projected.dtype)

    def _gated_norm(self, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """RMS-normalised per group in float32 and weighted (in float32), gated by silu(z) first (transformers'
        MambaRMSNormGated) or after (Falcon-H1's mamba_norm_before_gate)."""
        h = y.float()
        if not self.norm_before_gate:
            h = h * F.silu(z.float())
        h = rms_normalize(h.unflatten(-1, (self.groups, self.intermediate // self.groups)), self.norm_eps)
        h = self.norm.weight * h.flatten(-2).to(y.dtype)
        return h * F.silu(z.float()) if self.norm_before_gate else h


def _scan(
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    D: torch.Tensor,
    state: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """x [B, S, H, P], dt [B, S, H], A [H] (float32), B, C [B, S, G, N], D [H]; state [B, H, P, N] or None (zeros).
    Returns (y [B, S, H, P] float32, with the D skip; the state after the last token, float32)."""
    heads = x.shape[2]
    B, C = (t.float().repeat_interleave(heads // t.shape[2], dim=2) for t in (B, C))
    x, dt = x.float(), dt.float()
    b, s, h, p = x.shape
    state = x.new_zeros(b, h, p, B.shape[-1]) if state is None else state.float()
    y = torch.empty_like(x)
    for t in range(s):
        decay = (A * dt[:, t]).exp()[..., None, None]  # [B, H, 1, 1]
        state = state * decay + (dt[:, t, :, None] * x[:, t])[..., None] * B[:, t, :, None, :]
        y[:, t] = (state * C[:, t, :, None, :]).sum(-1)
    return y + D[:, None].float() * x, state
