"""Gated DeltaNet, the linear-attention token mixer of Qwen3-Next and Qwen3.5: a fixed-size state per value head,
decayed and corrected by the delta rule at every token, instead of a growing KV cache.

q, k, v come from `in_proj_qkv` through a causal depthwise convolution and SiLU; z, b and a per value head. With
beta = sigmoid(b) and g = -exp(A_log) * softplus(a + dt_bias), in float32, q and k L2-normalised (q / sqrt(Dk)):

    S <- S * exp(g);  S <- S + k (beta (v - S^T k))^T;  o = S^T q

then o is RMS-normalised per head, gated by silu(z) and mapped back by `out_proj`: transformers'
torch_recurrent_gated_delta_rule, token by token.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .attention import AttentionContext
from .conv import causal_conv
from .norms import rms_normalize


class GatedDeltaNet(nn.Module):
    """forward(x [B, S, hidden], cos, sin, ctx) -> [B, S, hidden], the signature of Attention (cos / sin unused)."""

    def __init__(
        self,
        hidden_size: int,
        num_k_heads: int,
        num_v_heads: int,
        head_k_dim: int,
        head_v_dim: int,
        conv_kernel: int,
        norm_eps: float = 1e-6,
        activation: str = "silu",
        allow_neg_eigval: bool = False,
    ) -> None:
        super().__init__()
        if num_v_heads % num_k_heads:
            raise ValueError(f"GatedDeltaNet: {num_v_heads} value heads do not group over {num_k_heads} key heads")
        if activation != "silu":
            raise ValueError(f"GatedDeltaNet: the convolution's activation {activation!r} is not SiLU")
        self.nk, self.nv, self.dk, self.dv, self.kernel = num_k_heads, num_v_heads, head_k_dim, head_v_dim, conv_kernel
        self.norm_eps = norm_eps
        self.beta_scale = 2.0 if allow_neg_eigval else 1.0  # FLA / OLMo-hybrid: beta in [0, 2]
        key_dim, value_dim = num_k_heads * head_k_dim, num_v_heads * head_v_dim
        self.conv_dim = 2 * key_dim + value_dim
        self.in_proj_qkv = nn.Linear(hidden_size, self.conv_dim, bias=False)
        self.in_proj_z = nn.Linear(hidden_size, value_dim, bias=False)
        self.in_proj_b = nn.Linear(hidden_size, num_v_heads, bias=False)
        self.in_proj_a = nn.Linear(hidden_size, num_v_heads, bias=False)
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, conv_kernel, groups=self.conv_dim, bias=False)
        self.dt_bias = nn.Parameter(torch.ones(num_v_heads))
        self.A_log = nn.Parameter(torch.zeros(num_v_heads))
        self.norm = nn.Module()
        self.norm.weight = nn.Parameter(torch.ones(head_v_dim))
        self.out_proj = nn.Linear(value_dim, hidden_size, bias=False)

    def grouped_rows(self, part: str) -> torch.Tensor:
        """Rows of `part` (in_proj_qkv, in_proj_z, in_proj_b, in_proj_a) in Qwen3-Next's grouped projections: per key
        head g, in_proj_qkvz holds [q_g (dk); k_g (dk); v_g (r dv); z_g (r dv)] and in_proj_ba [b_g (r); a_g (r)],
        r = value heads per key head."""
        r = self.nv // self.nk
        if part in ("in_proj_b", "in_proj_a"):
            offset, size, group = (0 if part == "in_proj_b" else r), r, 2 * r
            return _rows(self.nk, group, [(offset, size)])
        group = 2 * self.dk + 2 * r * self.dv
        if part == "in_proj_z":
            return _rows(self.nk, group, [(2 * self.dk + r * self.dv, r * self.dv)])
        if part == "in_proj_qkv":  # all q, then all k, then all v
            q, k, v = (
                _rows(self.nk, group, [(o, n)])
                for o, n in ((0, self.dk), (self.dk, self.dk), (2 * self.dk, r * self.dv))
            )
            return torch.cat((q, k, v))
        raise ValueError(f"GatedDeltaNet: no grouped rows for {part!r}")

    def fused_rows(self, part: str) -> torch.Tensor:
        """Rows of `part` in one projection holding them all in turn, [q | k | v | z | b | a] (Lara-mini's `in_proj`)."""
        sizes = {
            "in_proj_qkv": self.conv_dim,
            "in_proj_z": self.nv * self.dv,
            "in_proj_b": self.nv,
            "in_proj_a": self.nv,
        }
        if part not in sizes:
            raise ValueError(f"GatedDeltaNet: no fused rows for {part!r}")
        start = sum(sizes[name] for name in list(sizes)[: list(sizes).index(part)])
        return torch.arange(start, start + sizes[part])

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor | None, sin: torch.Tensor | None, ctx: AttentionContext | None = None
    ) -> torch.Tensor:
        ctx = ctx or AttentionContext()
        b, s, _ = x.shape
        if ctx.key_mask is not None:  # padding zeroed first, as transformers does: it then leaves the state at zero
            x = (x * ctx.key_mask[:, -s:, None]).to(x.dtype)
        mixed = F.silu(causal_conv(self.in_proj_qkv(x).transpose(1, 2), self.conv1d, ctx)).transpose(1, 2)
        key_dim = self.nk * self.dk
        q, k, v = mixed.split([key_dim, key_dim, self.nv * self.dv], dim=-1)
        q, k = q.reshape(b, s, self.nk, self.dk), k.reshape(b, s, self.nk, self.dk)
        v = v.reshape(b, s, self.nv, self.dv)
        beta = self.in_proj_b(x).sigmoid() * self.beta_scale
        decay = -self.A_log.float().exp() * F.softplus(self.in_proj_a(x).float() + self.dt_bias)
        state = ctx.cache.recurrent_state if ctx.cache is not None else None
        out, state = _gated_delta_rule(q, k, v, decay, beta, state)
        if ctx.cache is not None:
            ctx.cache.recurrent_state = state
        z = self.in_proj_z(x).reshape(b, s, self.nv, self.dv)
        return self.out_proj(self._gated_norm(out, z).reshape(b, s, self.nv * self.dv))

    def _gated_norm(self, out: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """RMS-normalised per head in float32, weighted, gated by silu(z) (transformers' RMSNormGated)."""
        normed = self.norm.weight * rms_normalize(out, self.norm_eps)
        return (normed * F.silu(z.float())).to(out.dtype)


def _rows(groups: int, group: int, spans: list[tuple[int, int]]) -> torch.Tensor:
    """Row indices of the spans (offset, size) within each of `groups` consecutive groups of `group` rows."""
    return torch.cat([torch.arange(g * group + o, g * group + o + n) for g in range(groups) for o, n in spans])


def _gated_delta_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    decay: torch.Tensor,
    beta: torch.Tensor,
    state: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """q, k [B, S, Hk, Dk], v [B, S, Hv, Dv], decay, beta [B, S, Hv]; state [B, Hv, Dk, Dv] or None (zeros).
    Returns (out [B, S, Hv, Dv] in v's dtype, the state after the last token, float32)."""
    dtype = v.dtype
    if q.shape[2] != v.shape[2]:  # each key head serves Hv / Hk consecutive value heads
        q, k = (t.repeat_interleave(v.shape[2] // q.shape[2], dim=2) for t in (q, k))
    q, k, v, beta, decay = (t.transpose(1, 2).float() for t in (q, k, v, beta, decay))
    q = q * torch.rsqrt((q * q).sum(-1, keepdim=True) + 1e-6)
    k = k * torch.rsqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    q = q / q.shape[-1] ** 0.5
    b, h, s, dk = k.shape
    state = v.new_zeros(b, h, dk, v.shape[-1]) if state is None else state.float()
    out = torch.empty_like(v)
    for t in range(s):
        state = state * decay[:, :, t].exp()[..., None, None]
        remembered = (state * k[:, :, t, :, None]).sum(dim=-2)
        delta = (v[:, :, t] - remembered) * beta[:, :, t, None]
        state = state + k[:, :, t, :, None] * delta[:, :, None, :]
        out[:, :, t] = (state * q[:, :, t, :, None]).sum(dim=-2)
    return out.transpose(1, 2).to(dtype), state
