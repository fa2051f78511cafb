"""Softmax attention: MHA / GQA / MQA with causal and sliding-window masks, attention sinks, logit soft-capping,
custom scale (query_pre_attn_scalar, granite's attention_multiplier) and optional QK-norm.

Layout: activations [batch, seq, heads, head_dim]; `attend` takes [B, H, S, D]. Full-prefix forward only (positions
0..S-1, no KV cache, no padding mask).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from onboard.kernels import dispatch

from .norms import QKNorm, QKNormSpec


def causal_mask(q_len: int, kv_len: int, sliding_window: int | None, device: torch.device) -> torch.Tensor:
    """Boolean [q_len, kv_len], True where query i (at position kv_len - q_len + i) may see key j.

    Sliding window as in transformers' masking_utils: key j is visible iff q - window < j <= q."""
    q_pos = torch.arange(kv_len - q_len, kv_len, device=device)[:, None]
    k_pos = torch.arange(kv_len, device=device)[None, :]
    mask = k_pos <= q_pos
    if sliding_window is not None:
        mask &= k_pos > q_pos - sliding_window
    return mask


def _repeat_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    if groups == 1:
        return x
    b, h, s, d = x.shape
    return x[:, :, None].expand(b, h, groups, s, d).reshape(b, h * groups, s, d)


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scale: float,
    sliding_window: int | None = None,
    softcap: float | None = None,
    sinks: torch.Tensor | None = None,
) -> torch.Tensor:
    """Causal attention. q [B, H, Sq, Dk], k [B, Hkv, Skv, Dk], v [B, Hkv, Skv, Dv] -> [B, Sq, H, Dv].

    softcap: scores -> cap * tanh(scores / cap) before masking (Gemma 2). sinks [H]: a learned logit per head that
    joins the softmax denominator and is then dropped (gpt-oss). Without either, uses torch SDPA."""
    groups = q.shape[1] // k.shape[1]
    k, v = _repeat_kv(k, groups), _repeat_kv(v, groups)
    mask = causal_mask(q.shape[2], k.shape[2], sliding_window, q.device)
    if softcap is None and sinks is None:
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
        return out.transpose(1, 2)
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale
    if softcap is not None:
        scores = dispatch.softcap(scores, softcap)
    scores = scores.float().masked_fill(~mask, torch.finfo(torch.float32).min)
    if sinks is not None:
        sink = sinks.float().reshape(1, -1, 1, 1).expand(scores.shape[0], -1, scores.shape[2], 1)
        probs = torch.softmax(torch.cat((scores, sink), dim=-1), dim=-1)[..., :-1]
    else:
        probs = torch.softmax(scores, dim=-1)
    return torch.matmul(probs.to(v.dtype), v).transpose(1, 2)


class Attention(nn.Module):
    """Self-attention with a fused `qkv_proj` ([q; k; v] rows: H*D, Hkv*D, Hkv*D) and `o_proj`.

    Optional: `sinks` [H] parameter, `q_norm` / `k_norm` (QKNorm), per-layer `sliding_window`, `softcap`,
    `scale` (default head_dim ** -0.5; Gemma 2 passes query_pre_attn_scalar ** -0.5).
    """

    def __init__(
        self,
        hidden_size: int,
        num_heads: int,
        num_kv_heads: int,
        head_dim: int,
        *,
        qkv_bias: bool = False,
        o_bias: bool = False,
        scale: float | None = None,
        sliding_window: int | None = None,
        softcap: float | None = None,
        sinks: bool = False,
        qk_norm: QKNormSpec | None = None,
        rope_interleaved: bool = False,
    ) -> None:
        super().__init__()
        if num_heads % num_kv_heads:
            raise ValueError(f"num_heads {num_heads} is not a multiple of num_kv_heads {num_kv_heads}")
        self.num_heads, self.num_kv_heads, self.head_dim = num_heads, num_kv_heads, head_dim
        self.scale = head_dim**-0.5 if scale is None else scale
        self.sliding_window, self.softcap, self.rope_interleaved = sliding_window, softcap, rope_interleaved
        self.qkv_proj = nn.Linear(hidden_size, (num_heads + 2 * num_kv_heads) * head_dim, bias=qkv_bias)
        self.o_proj = nn.Linear(num_heads * head_dim, hidden_size, bias=o_bias)
        self.sinks = nn.Parameter(torch.zeros(num_heads)) if sinks else None
        self.q_norm = self.k_norm = None
        if qk_norm is not None:
            spec = (qk_norm.eps, qk_norm.kind, qk_norm.offset, qk_norm.scope, qk_norm.casting)
            self.q_norm = QKNorm(num_heads, head_dim, *spec)
            self.k_norm = QKNorm(num_kv_heads, head_dim, *spec)

    def forward(self, x: torch.Tensor, cos: torch.Tensor | None, sin: torch.Tensor | None) -> torch.Tensor:
        """x [B, S, hidden]; cos/sin half tables [B or 1, S, R/2] (None: no rotary, e.g. NoPE layers)."""
        b, s, _ = x.shape
        h, hkv, d = self.num_heads, self.num_kv_heads, self.head_dim
        q, k, v = self.qkv_proj(x).split([h * d, hkv * d, hkv * d], dim=-1)
        q, k, v = q.view(b, s, h, d), k.view(b, s, hkv, d), v.view(b, s, hkv, d)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        if cos is not None:
            q = dispatch.rope(q, cos, sin, self.rope_interleaved)
            k = dispatch.rope(k, cos, sin, self.rope_interleaved)
        out = attend(
            q.transpose(1, 2),
            k.transpose(1, 2),
            v.transpose(1, 2),
            self.scale,
            self.sliding_window,
            self.softcap,
            self.sinks,
        )
        return self.o_proj(out.reshape(b, s, h * d))
