"""Multi-head latent attention (DeepSeek V2/V3): low-rank q (optional) and a shared compressed kv latent, with a
decoupled rotary part. Parameter names equal the checkpoints' (q_proj | q_a_proj, q_a_layernorm, q_b_proj;
kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj), so weights load by name."""

from __future__ import annotations

import math

import torch
from torch import nn

from onboard.kernels import dispatch

from .attention import AttentionContext, attend
from .norms import RMSNorm
from .rotary import RopeConfig


def mla_scale(qk_head_dim: int, rope: RopeConfig | None = None) -> float:
    """Softmax scale: qk_head_dim ** -0.5, times yarn's mscale(factor, mscale_all_dim) ** 2 when the rope is scaled
    and mscale_all_dim is set (as DeepSeek's reference code and transformers do)."""
    scale = qk_head_dim**-0.5
    if rope is not None and rope.rope_type != "default" and rope.mscale_all_dim:
        factor = rope.factor or 1.0
        m = 1.0 if factor <= 1 else 0.1 * rope.mscale_all_dim * math.log(factor) + 1.0
        scale *= m * m
    return scale


class MLAttention(nn.Module):
    """MLA self-attention. forward(x [B, S, hidden], cos, sin [.., S, qk_rope_head_dim / 2]) -> [B, S, hidden].

    `rope_interleaved=True` for checkpoints whose rope dims are stored as interleaved pairs (DeepSeek V3's
    `rope_interleave`); attention scores equal HF's, which writes the rotated pairs de-interleaved."""

    def __init__(
        self,
        hidden_size: int,
        num_heads: int,
        *,
        q_lora_rank: int | None,
        kv_lora_rank: int,
        qk_nope_head_dim: int,
        qk_rope_head_dim: int,
        v_head_dim: int,
        rms_norm_eps: float = 1e-6,
        bias: bool = False,
        scale: float | None = None,
        rope_interleaved: bool = False,
    ) -> None:
        super().__init__()
        self.num_heads, self.q_lora_rank, self.kv_lora_rank = num_heads, q_lora_rank, kv_lora_rank
        self.nope, self.rope_dim, self.v_head_dim = qk_nope_head_dim, qk_rope_head_dim, v_head_dim
        self.qk_head_dim = qk_nope_head_dim + qk_rope_head_dim
        self.scale = self.qk_head_dim**-0.5 if scale is None else scale
        self.rope_interleaved = rope_interleaved
        q_out = num_heads * self.qk_head_dim
        if q_lora_rank is None:
            self.q_proj = nn.Linear(hidden_size, q_out, bias=False)
        else:
            self.q_a_proj = nn.Linear(hidden_size, q_lora_rank, bias=bias)
            self.q_a_layernorm = RMSNorm(q_lora_rank, rms_norm_eps)
            self.q_b_proj = nn.Linear(q_lora_rank, q_out, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(hidden_size, kv_lora_rank + qk_rope_head_dim, bias=bias)
        self.kv_a_layernorm = RMSNorm(kv_lora_rank, rms_norm_eps)
        self.kv_b_proj = nn.Linear(kv_lora_rank, num_heads * (qk_nope_head_dim + v_head_dim), bias=False)
        self.o_proj = nn.Linear(num_heads * v_head_dim, hidden_size, bias=bias)

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, ctx: AttentionContext | None = None
    ) -> torch.Tensor:
        """ctx: padding mask and KV cache (the cache holds the expanded per-head keys and values, not the latent:
        simple and exact, at H x the memory of a latent cache; in-process decode only)."""
        b, s, _ = x.shape
        h = self.num_heads
        q = self.q_proj(x) if self.q_lora_rank is None else self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x)))
        q_nope, q_rot = q.view(b, s, h, self.qk_head_dim).split([self.nope, self.rope_dim], dim=-1)
        kv_latent, k_rot = self.kv_a_proj_with_mqa(x).split([self.kv_lora_rank, self.rope_dim], dim=-1)
        q_rot = dispatch.rope(q_rot, cos, sin, self.rope_interleaved)
        k_rot = dispatch.rope(k_rot.reshape(b, s, 1, self.rope_dim), cos, sin, self.rope_interleaved)
        kv = self.kv_b_proj(self.kv_a_layernorm(kv_latent)).view(b, s, h, self.nope + self.v_head_dim)
        k_nope, v = kv.split([self.nope, self.v_head_dim], dim=-1)
        q = torch.cat((q_nope, q_rot), dim=-1)
        k = torch.cat((k_nope, k_rot.expand(b, s, h, self.rope_dim)), dim=-1)
        k, v = k.transpose(1, 2), v.transpose(1, 2)
        ctx = ctx or AttentionContext()
        if ctx.cache is not None:
            k, v = ctx.cache.extend(k, v)
        out = attend(q.transpose(1, 2), k, v, self.scale, key_mask=ctx.key_mask)
        return self.o_proj(out.reshape(b, s, h * self.v_head_dim))
