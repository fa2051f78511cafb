"""Multi-head latent attention (DeepSeek V2/V3): low-rank q (optional) and a shared compressed kv latent, with a
decoupled rotary part; parameter names equal the checkpoints'. DeepSeek Sparse Attention (DeepSeek-V3.2,
GLM-MoE-DSA): an `Indexer` keeps the `topk` best-scoring visible keys per query."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from onboard.kernels import dispatch

from .attention import AttentionContext, attend, causal_mask
from .norms import RMSNorm
from .rotary import RopeConfig, yarn_mscale


def mla_scale(qk_head_dim: int, rope: RopeConfig | None = None) -> float:
    """Softmax scale: qk_head_dim ** -0.5, times yarn's mscale(factor, mscale_all_dim) ** 2 when the rope is scaled
    and mscale_all_dim is set (as DeepSeek's reference code and transformers do)."""
    scale = qk_head_dim**-0.5
    if rope is not None and rope.rope_type != "default" and rope.mscale_all_dim:
        scale *= yarn_mscale(rope.factor or 1.0, rope.mscale_all_dim) ** 2
    return scale


@dataclass(frozen=True)
class IndexerSpec:
    """DSA's lightning indexer: `n_heads` scoring heads of `head_dim`, the `topk` keys kept per query; its rotary
    (on the first qk_rope_head_dim dims) half-split (DeepSeek-V3.2) or on interleaved pairs (GLM-MoE-DSA)."""

    n_heads: int
    head_dim: int
    topk: int
    rope_interleaved: bool = False


class Indexer(nn.Module):
    """Which keys each query attends to: score[s, t] = sum_h w[s, h] / sqrt(H) * relu(q[s, h] . k[t] / sqrt(D)),
    in float32 (transformers' bf16 equivalent of DeepSeek's fp8 kernel; the Hadamard rotation it skips preserves
    dot products), over the visible keys; the `topk` highest are kept. k is one head shared by all, LayerNorm'd."""

    def __init__(self, hidden_size: int, q_lora_rank: int, spec: IndexerSpec) -> None:
        super().__init__()
        self.spec = spec
        self.wq_b = nn.Linear(q_lora_rank, spec.n_heads * spec.head_dim, bias=False)
        self.wk = nn.Linear(hidden_size, spec.head_dim, bias=False)
        self.k_norm = nn.LayerNorm(spec.head_dim, eps=1e-6)
        self.weights_proj = nn.Linear(hidden_size, spec.n_heads, bias=False)

    def forward(
        self, x: torch.Tensor, q_latent: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, ctx: AttentionContext
    ) -> torch.Tensor:
        """Bool [B, 1, S, T]: True at the keys each query keeps (its cached keys first when decoding)."""
        b, s, _ = x.shape
        h, d = self.spec.n_heads, self.spec.head_dim
        q = dispatch.rope(self.wq_b(q_latent).view(b, s, h, d), cos, sin, self.spec.rope_interleaved)
        k = dispatch.rope(self.k_norm(self.wk(x)).view(b, s, 1, d), cos, sin, self.spec.rope_interleaved)[:, :, 0]
        if ctx.cache is not None:
            k = ctx.cache.extend_index(k)
        scores = torch.relu(torch.matmul(q.float(), k.float().transpose(-1, -2).unsqueeze(1)) * d**-0.5)
        weights = self.weights_proj(x.to(self.weights_proj.weight.dtype)).float() * h**-0.5
        index = torch.matmul(weights.unsqueeze(-2), scores).squeeze(-2)  # [B, S, T]
        visible = causal_mask(s, k.shape[1], None, x.device)[None]
        if ctx.key_mask is not None:
            visible = visible & ctx.key_mask[:, None, :]
        index = index.masked_fill(~visible, float("-inf"))
        keep = torch.zeros_like(index, dtype=torch.bool)
        if ctx.key_mask is None:
            keep.scatter_(-1, index.topk(min(self.spec.topk, index.shape[-1]), dim=-1).indices, True)
            return keep[:, None]
        # Ties are common (relu makes a key's score exactly 0 when every head scores it <= 0), and which tied key
        # torch.topk keeps depends on the row's length and offset: each row's top-k is taken over its own keys, its
        # left padding cut off, so a padded row selects as the row alone does (and as transformers does unpadded).
        for row, pad in enumerate((~ctx.key_mask).sum(dim=-1).tolist()):
            own = index[row, :, pad:]
            keep[row, :, pad:].scatter_(-1, own.topk(min(self.spec.topk, own.shape[-1]), dim=-1).indices, True)
        return keep[:, None]


class MLAttention(nn.Module):
    """MLA self-attention. forward(x [B, S, hidden], cos, sin [.., S, qk_rope_head_dim / 2]) -> [B, S, hidden].

    `rope_interleaved=True` for checkpoints whose rope dims are stored as interleaved pairs (DeepSeek V3's
    `rope_interleave`); attention scores equal HF's, which writes the rotated pairs de-interleaved.

    dots.llm3's variant (all off by default): `latent_scale` multiplies the normed q and kv latents by
    sqrt(hidden / rank) (the indexer reads the scaled q latent); `k_rope_norm_eps` RMS-normalises the shared rotary key
    head before its rotation (`k_rope_only_layernorm`); `head_gate` multiplies each head's output by
    sigmoid(g_proj(x)), one value per head, before o_proj."""

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
        indexer: IndexerSpec | None = None,
        latent_scale: bool = False,
        k_rope_norm_eps: float | None = None,
        head_gate: bool = False,
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
        if indexer is not None and q_lora_rank is None:
            raise ValueError("the DSA indexer reads the low-rank query latent: q_lora_rank is required")
        self.indexer = Indexer(hidden_size, q_lora_rank, indexer) if indexer is not None else None  # type: ignore[arg-type]
        self.q_latent_scale = (hidden_size / q_lora_rank) ** 0.5 if latent_scale and q_lora_rank else 1.0
        self.kv_latent_scale = (hidden_size / kv_lora_rank) ** 0.5 if latent_scale else 1.0
        self.k_rope_only_layernorm = RMSNorm(qk_rope_head_dim, k_rope_norm_eps) if k_rope_norm_eps is not None else None
        self.g_proj = nn.Linear(hidden_size, num_heads, bias=False) if head_gate else None

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, ctx: AttentionContext | None = None
    ) -> torch.Tensor:
        """The cache holds the expanded per-head keys and values, not the latent (exact, at H x the memory)."""
        b, s, _ = x.shape
        h = self.num_heads
        q_latent = None if self.q_lora_rank is None else self.q_a_layernorm(self.q_a_proj(x))
        if q_latent is not None and self.q_latent_scale != 1.0:
            q_latent = q_latent * self.q_latent_scale
        q = self.q_proj(x) if q_latent is None else self.q_b_proj(q_latent)
        q_nope, q_rot = q.view(b, s, h, self.qk_head_dim).split([self.nope, self.rope_dim], dim=-1)
        kv_latent, k_rot = self.kv_a_proj_with_mqa(x).split([self.kv_lora_rank, self.rope_dim], dim=-1)
        k_rot = k_rot.reshape(b, s, 1, self.rope_dim)
        if self.k_rope_only_layernorm is not None:
            k_rot = self.k_rope_only_layernorm(k_rot)
        q_rot = dispatch.rope(q_rot, cos, sin, self.rope_interleaved)
        k_rot = dispatch.rope(k_rot, cos, sin, self.rope_interleaved)
        kv_latent = self.kv_a_layernorm(kv_latent)
        if self.kv_latent_scale != 1.0:
            kv_latent = kv_latent * self.kv_latent_scale
        kv = self.kv_b_proj(kv_latent).view(b, s, h, self.nope + self.v_head_dim)
        k_nope, v = kv.split([self.nope, self.v_head_dim], dim=-1)
        q = torch.cat((q_nope, q_rot), dim=-1)
        k = torch.cat((k_nope, k_rot.expand(b, s, h, self.rope_dim)), dim=-1)
        k, v = k.transpose(1, 2), v.transpose(1, 2)
        ctx = ctx or AttentionContext()
        keep = self.indexer(x, q_latent, cos, sin, ctx) if self.indexer is not None else None
        if ctx.cache is not None:
            k, v = ctx.cache.extend(k, v)
        out = attend(q.transpose(1, 2), k, v, self.scale, key_mask=ctx.key_mask, keep=keep)
        if self.g_proj is not None:
            out = out * torch.sigmoid(self.g_proj(x)).view(b, s, h, 1)
        return self.o_proj(out.reshape(b, s, h * self.v_head_dim))
