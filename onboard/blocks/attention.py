"""Softmax attention (MHA / GQA / MQA) and its variants; the layer's `AttentionContext` carries the key padding
mask and its `LayerKV` cache. Padding is on the left, so a row's real tokens are contiguous and the causal /
sliding-window mask stays in index space.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn

from onboard.kernels import dispatch

from .norms import QKNorm, QKNormSpec, RMSNorm, rms_normalize


def causal_mask(q_len: int, kv_len: int, sliding_window: int | None, device: torch.device) -> torch.Tensor:
    """Boolean [q_len, kv_len], True where query i (at position kv_len - q_len + i) may see key j; with a sliding
    window, as transformers' masking_utils: q - window < j <= q."""
    q_pos = torch.arange(kv_len - q_len, kv_len, device=device)[:, None]
    k_pos = torch.arange(kv_len, device=device)[None, :]
    mask = k_pos <= q_pos
    if sliding_window is not None:
        mask &= k_pos > q_pos - sliding_window
    return mask


@dataclass
class LayerKV:
    """One layer's cached keys and values, [B, Hkv, S, D] (keys after rotary); empty until the first forward."""

    k: torch.Tensor | None = None
    v: torch.Tensor | None = None
    index_k: torch.Tensor | None = None  # DSA indexer keys [B, S, D] (mla.Indexer)
    conv_state: torch.Tensor | None = None  # a convolving layer's last kernel - 1 inputs [B, channels, kernel - 1]
    recurrent_state: torch.Tensor | None = None  # a recurrent layer's state (deltanet, mamba, mamba2), float32

    def extend(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append this step's keys and values; returns all of them (cached first)."""
        if self.k is not None:
            k, v = torch.cat((self.k, k), dim=2), torch.cat((self.v, v), dim=2)
        self.k, self.v = k, v
        return k, v

    def extend_index(self, k: torch.Tensor) -> torch.Tensor:
        """Append this step's indexer keys; returns all of them (cached first)."""
        if self.index_k is not None:
            k = torch.cat((self.index_k, k), dim=1)
        self.index_k = k
        return k


@dataclass(frozen=True)
class AttentionContext:
    """What a layer's attention needs beyond its input: which keys are real, and where to cache them."""

    key_mask: torch.Tensor | None = None  # bool [B, kv_len] over cached + new keys, True at real tokens
    cache: LayerKV | None = None
    positions: torch.Tensor | None = None  # token positions [1 or B, S], a padded row's from its first real token
    layer_input: torch.Tensor | None = None  # this layer's per-layer input [B, S, dim] (Gemma 4)


def _same_chunk(ctx: AttentionContext, q_len: int, kv_len: int, chunk: int) -> torch.Tensor:
    """Bool [B or 1, 1, q_len, kv_len]: key and query in the same chunk of `chunk` positions (Llama 4). Chunks start
    at each row's first real token, as transformers counts them; a key's position is the count of real keys before
    it. The causal and padding masks apply on top."""
    if ctx.positions is None:
        raise ValueError("Attention(chunk_size): chunked attention needs the positions (ctx.positions)")
    q_pos = ctx.positions
    if ctx.key_mask is not None:
        k_pos = ctx.key_mask.long().cumsum(dim=-1) - 1
    else:
        k_pos = torch.arange(kv_len, device=q_pos.device)[None, :]
    same = torch.div(q_pos[:, :, None], chunk, rounding_mode="floor") == torch.div(
        k_pos[:, None, :], chunk, rounding_mode="floor"
    )
    return same[:, None]


def padded_mask(causal: torch.Tensor, key_mask: torch.Tensor | None) -> torch.Tensor:
    """[q, kv] causal mask -> [B, 1, q, kv] with padding keys hidden. A padding query with every key hidden sees all
    keys instead: its output is discarded, but a NaN row would poison real rows (0 x NaN) in the next layer."""
    if key_mask is None:
        return causal
    mask = (causal if causal.dim() == 4 else causal[None, None]) & key_mask[:, None, None, :]
    return mask | ~mask.any(dim=-1, keepdim=True)


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """ALiBi's per-head slopes, as BLOOM's _get_alibi_slopes."""
    closest = 2 ** math.floor(math.log2(num_heads))
    slopes = torch.pow(torch.tensor(2 ** (-(2 ** -(math.log2(closest) - 3)))), torch.arange(1, 1 + closest))
    if closest != num_heads:
        extra = torch.tensor(2 ** (-(2 ** -(math.log2(2 * closest) - 3))))
        remaining = min(closest, num_heads - closest)
        slopes = torch.cat((slopes, torch.pow(extra, torch.arange(1, 1 + 2 * remaining, 2))))
    return slopes.float()


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
    key_mask: torch.Tensor | None = None,
    keep: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """Causal attention. q [B, H, Sq, Dk], k [B, Hkv, Skv, Dk], v [B, Hkv, Skv, Dv] -> [B, Sq, H, Dv].

    softcap: cap * tanh(scores / cap) before masking (Gemma 2). sinks [H]: a logit per head joining the softmax
    denominator (gpt-oss). key_mask [B, Skv]: False at padding. keep [B, 1, Sq, Skv]: False at keys a sparse
    selection left out (mla.Indexer). bias: added to the scaled scores (ALiBi). Else torch SDPA."""
    groups = q.shape[1] // k.shape[1]
    k, v = _repeat_kv(k, groups), _repeat_kv(v, groups)
    causal = causal_mask(q.shape[2], k.shape[2], sliding_window, q.device)
    mask = padded_mask(causal if keep is None else causal & keep, key_mask)
    if softcap is None and sinks is None and bias is None:
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
        return out.transpose(1, 2)
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale
    if bias is not None:
        scores = scores.float() + bias
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
    """Self-attention with a fused `qkv_proj` ([q; k; v] rows: H*D, Hkv*D, Hkv*Dv) and `o_proj`. Options:

    - `scale`: default head_dim ** -0.5 (Gemma 2: query_pre_attn_scalar ** -0.5); `sinks`, `softcap`, `sliding_window`.
    - `qk_norm` (QKNorm), on the rotated heads with `qk_norm_after_rope` (HunYuan V1). `clip_qkv`: q, k, v clamped
      before the rotary, q and k after their QK-norm (OLMo, OLMoE).
    - Output gates, before `o_proj`: `output_gate` (a gate row per head in q_proj, [q_h; g_h]: Qwen3-Next),
      `gate_proj` (a projection of its own: AFMoE; `gate_per_head`: LFM3; `gate_bias`: Beam), `gate_fn` sigmoid or
      softplus in float32 (Laguna). `sub_norm_eps`: an RMSNorm over the output (BitNet's attn_sub_norm).
    - Positions: `alibi` (BLOOM, MPT); `rope_inverted` (NanoChat's rotation by -angle); on NoPE layers the queries
      scaled by `nope_query_scale` (Beam) or `nope_temperature` (Llama 4), from `ctx.positions`; `chunk_size`
      (Llama 4's chunked attention).
    - Values: `v_head_dim` and `v_scale` (MiMo-V2-Flash); `values_from_keys`: the keys as projected, before norm and
      rotary (Gemma 4's attention_k_eq_v); `v_norm_eps`: RMS per head, no weight (Gemma 4). `key_multiplier`: Falcon-H1.
    - `differential`: DiffLlama's attention, lambda_init = 0.8 - 0.6 exp(-0.3 `layer_index`), normalised with
      `norm_eps`.
    - `kv_shared`: no key or value rows; the layer attends over what another layer cached in `ctx.cache` earlier in
      the same forward, and never extends it (Gemma 4).
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
        output_gate: bool = False,
        qk_norm_after_rope: bool = False,
        clip_qkv: float | None = None,
        sub_norm_eps: float | None = None,
        gate_proj: bool = False,
        rope_inverted: bool = False,
        v_head_dim: int | None = None,
        v_scale: float | None = None,
        differential: bool = False,
        layer_index: int = 0,
        norm_eps: float = 1e-6,
        gate_per_head: bool = False,
        alibi: bool = False,
        gate_bias: bool = False,
        nope_query_scale: tuple[float, float] | None = None,
        nope_temperature: tuple[float, float] | None = None,
        chunk_size: int | None = None,
        key_multiplier: float | None = None,
        values_from_keys: bool = False,
        v_norm_eps: float | None = None,
        kv_shared: bool = False,
        gate_fn: str = "sigmoid",
    ) -> None:
        super().__init__()
        dv = head_dim if v_head_dim is None else v_head_dim
        if values_from_keys and dv != head_dim:
            raise ValueError("Attention(values_from_keys): values as wide as keys")
        # A KV-shared layer projects neither keys nor values: values_from_keys is its source layer's business
        self.values_from_keys = values_from_keys and not kv_shared
        self.v_norm_eps, self.kv_shared = v_norm_eps, kv_shared
        if dv != head_dim and (output_gate or gate_proj or sub_norm_eps is not None):
            raise ValueError("Attention: an output gate or sub-norm with v_head_dim != head_dim is not a known layout")
        if gate_proj and output_gate:
            raise ValueError("Attention: one output gate, from q_proj's rows (output_gate) or from gate_proj")
        if clip_qkv is not None and qk_norm_after_rope:
            raise ValueError("Attention: clip_qkv with a QK-norm after the rotary embedding is not a known order")
        if num_heads % num_kv_heads:
            raise ValueError(f"num_heads {num_heads} is not a multiple of num_kv_heads {num_kv_heads}")
        self.num_heads, self.num_kv_heads, self.head_dim, self.v_head_dim = num_heads, num_kv_heads, head_dim, dv
        self.v_scale = v_scale
        self.scale = head_dim**-0.5 if scale is None else scale
        self.sliding_window, self.softcap, self.rope_interleaved = sliding_window, softcap, rope_interleaved
        self.q_rows = num_heads * head_dim * (2 if output_gate else 1)
        self.output_gate, self.qk_norm_after_rope, self.clip_qkv = output_gate, qk_norm_after_rope, clip_qkv
        self.kv_rows = (0, 0) if kv_shared else (num_kv_heads * head_dim, 0 if values_from_keys else num_kv_heads * dv)
        self.qkv_proj = nn.Linear(hidden_size, self.q_rows + sum(self.kv_rows), bias=qkv_bias)
        self.o_proj = nn.Linear(num_heads * dv, hidden_size, bias=o_bias)
        self.sinks = nn.Parameter(torch.zeros(num_heads)) if sinks else None
        self.sub_norm = RMSNorm(num_heads * head_dim, sub_norm_eps) if sub_norm_eps is not None else None
        self.gate_per_head = gate_per_head
        gate_rows = num_heads if gate_per_head else num_heads * head_dim
        self.gate_proj = nn.Linear(hidden_size, gate_rows, bias=False) if gate_proj else None
        if gate_bias and (gate_proj is False or gate_per_head):
            raise ValueError("Attention: gate_bias is a bias per head on gate_proj's elementwise gate")
        self.gate_bias = nn.Parameter(torch.zeros(num_heads)) if gate_bias else None
        if gate_fn not in ("sigmoid", "softplus"):
            raise ValueError(f"Attention: gate_fn {gate_fn!r} is not sigmoid or softplus")
        self.gate_fn = gate_fn
        if nope_query_scale is not None and nope_temperature is not None:
            raise ValueError("Attention: one position scale for the queries of NoPE layers, not two")
        self.nope_query_scale, self.nope_temperature, self.chunk_size = nope_query_scale, nope_temperature, chunk_size
        self.key_multiplier = key_multiplier
        self.rope_inverted = rope_inverted
        self.differential = differential
        self.alibi = alibi
        if differential:
            if num_heads % 2 or num_kv_heads % 2 or dv != head_dim:
                raise ValueError("Attention(differential): heads and KV heads must be even, values as wide as keys")
            self.lambda_init, self.norm_eps = 0.8 - 0.6 * math.exp(-0.3 * layer_index), norm_eps
            for name in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"):
                setattr(self, name, nn.Parameter(torch.zeros(head_dim)))
        self.q_norm = self.k_norm = None
        if qk_norm is not None:
            self.q_norm = QKNorm(num_heads, head_dim, **asdict(qk_norm))
            self.k_norm = QKNorm(num_kv_heads, head_dim, **asdict(qk_norm)) if not kv_shared else None

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor | None, sin: torch.Tensor | None, ctx: AttentionContext | None = None
    ) -> torch.Tensor:
        """x [B, S, hidden]; cos/sin half tables [B or 1, S, R/2] (None: no rotary, e.g. NoPE layers); ctx: padding
        mask and KV cache (None: an unpadded full-prefix forward)."""
        b, s, _ = x.shape
        h, hkv, d, dv = self.num_heads, self.num_kv_heads, self.head_dim, self.v_head_dim
        if self.kv_shared:
            return self._shared_kv_forward(x, cos, sin, ctx)
        q, k, v = self.qkv_proj(x).split([self.q_rows, *self.kv_rows], dim=-1)
        gate = self.gate_proj(x) if self.gate_proj is not None else None
        if self.output_gate:
            q, gate = q.view(b, s, h, 2 * d).chunk(2, dim=-1)
        q, k = q.reshape(b, s, h, d), k.view(b, s, hkv, d)
        v = k if self.values_from_keys else v.view(b, s, hkv, dv)
        if self.v_norm_eps is not None:
            v = rms_normalize(v, self.v_norm_eps)
        if self.v_scale is not None:
            v = v * self.v_scale
        if self.key_multiplier is not None:  # Falcon-H1: keys scaled after their projection
            k = k * self.key_multiplier
        if self.q_norm is not None and not self.qk_norm_after_rope:
            q, k = self.q_norm(q), self.k_norm(k)
        if self.clip_qkv is not None:
            c = self.clip_qkv
            q, k, v = q.clamp(-c, c), k.clamp(-c, c), v.clamp(-c, c)
        if cos is not None:
            sin = -sin if self.rope_inverted else sin
            q = dispatch.rope(q, cos, sin, self.rope_interleaved)
            k = dispatch.rope(k, cos, sin, self.rope_interleaved)
        if self.q_norm is not None and self.qk_norm_after_rope:
            q, k = self.q_norm(q), self.k_norm(k)
        k, v = k.transpose(1, 2), v.transpose(1, 2)
        ctx = ctx or AttentionContext()
        if (self.nope_query_scale is not None or self.nope_temperature is not None) and cos is None:
            q = (q.float() * self._nope_scale(ctx)).to(q.dtype)  # q is [B, S, H, D] here
        if ctx.cache is not None:
            k, v = ctx.cache.extend(k, v)
        keep = _same_chunk(ctx, q.shape[1], k.shape[2], self.chunk_size) if self.chunk_size else None
        if self.differential:
            out = self._differential(q.transpose(1, 2), k, v, ctx.key_mask)
        else:
            bias = None
            if self.alibi:  # slope_h x key position, in float32 (made here: a float buffer would follow the model
                # dtype); key indices stand for positions, since left padding shifts a whole row, which softmax ignores
                slopes = alibi_slopes(h).to(k.device)
                bias = (slopes[:, None, None] * torch.arange(k.shape[2], device=k.device, dtype=torch.float32))[None]
            out = self._attend(q.transpose(1, 2), k, v, ctx.key_mask, keep=keep, bias=bias)
        out = out.reshape(b, s, h * dv)
        if gate is not None and self.gate_per_head:  # one gate per head, over its whole output (LFM3's g_proj)
            out = (out.view(b, s, h, dv) * self._gate(gate, out.dtype)[..., None]).reshape(b, s, h * dv)
        elif gate is not None:
            if self.gate_bias is not None:  # one bias per head, over its head_dim gate values (Beam)
                gate = gate.reshape(b, s, h, d) + self.gate_bias[:, None]
            out = out * self._gate(gate.reshape(b, s, h * d), out.dtype)
        if self.sub_norm is not None:
            out = self.sub_norm(out)
        return self.o_proj(out)

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_mask: torch.Tensor | None, **extra):
        return attend(q, k, v, self.scale, self.sliding_window, self.softcap, self.sinks, key_mask, **extra)

    def _gate(self, gate: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """sigmoid(gate) in the gate's dtype, or softplus(gate) in float32 then `dtype` (Laguna's g_proj)."""
        if self.gate_fn == "softplus":
            return F.softplus(gate.float()).to(dtype)
        return torch.sigmoid(gate)

    def _shared_kv_forward(
        self, x: torch.Tensor, cos: torch.Tensor | None, sin: torch.Tensor | None, ctx: AttentionContext | None
    ) -> torch.Tensor:
        """Queries of this layer over the keys and values its source layer cached in this forward (kv_shared)."""
        if ctx is None or ctx.cache is None or ctx.cache.k is None:
            raise ValueError("Attention(kv_shared): no keys and values from the source layer in ctx.cache")
        if self.output_gate or self.gate_proj is not None or self.differential or self.alibi or self.chunk_size:
            raise ValueError("Attention(kv_shared): plain softmax attention only")
        b, s, _ = x.shape
        q = self.qkv_proj(x).view(b, s, self.num_heads, self.head_dim)
        if self.q_norm is not None and not self.qk_norm_after_rope:
            q = self.q_norm(q)
        if cos is not None:
            q = dispatch.rope(q, cos, -sin if self.rope_inverted else sin, self.rope_interleaved)
        if self.q_norm is not None and self.qk_norm_after_rope:
            q = self.q_norm(q)
        out = self._attend(q.transpose(1, 2), ctx.cache.k, ctx.cache.v, ctx.key_mask)
        return self.o_proj(out.reshape(b, s, self.num_heads * self.v_head_dim))

    def _nope_scale(self, ctx: AttentionContext) -> torch.Tensor:
        """Per-position query scale [B or 1, S, 1, 1] of a layer without rotary: Beam's (1 + (p + 1) / base)^e, or
        Llama 4's temperature tuning log1p(floor((p + 1) / floor_scale)) * attn_scale + 1, in float32."""
        if ctx.positions is None:
            raise ValueError("Attention: the NoPE query scale needs the positions (ctx.positions)")
        pos = ctx.positions.float() + 1
        if self.nope_query_scale is not None:
            base, exponent = self.nope_query_scale
            scale = torch.exp(exponent * torch.log1p(pos / base))
        else:
            floor_scale, attn_scale = self.nope_temperature  # type: ignore[misc]
            scale = torch.log1p(torch.floor(pos / floor_scale)) * attn_scale + 1.0
        return scale[..., None, None]

    def _differential(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_mask: torch.Tensor | None
    ) -> torch.Tensor:
        """[B, S, H/2, 2D]: the two halves of the value heads attended with the same scores, then the second head
        half's output subtracted, weighted by lambda, from the first's, as transformers' DiffLlamaAttention."""
        halves = [half.repeat(1, 2, 1, 1) for half in v.chunk(2, dim=1)]
        both = [self._attend(q, k, half, key_mask) for half in halves]
        first, second = torch.cat(both, dim=-1).chunk(2, dim=2)
        lam = [
            torch.exp(torch.sum(a * b, dim=-1, dtype=torch.float32)).to(q.dtype)
            for a, b in ((self.lambda_q1, self.lambda_k1), (self.lambda_q2, self.lambda_k2))
        ]
        out = first - (lam[0] - lam[1] + self.lambda_init) * second
        return (1 - self.lambda_init) * rms_normalize(out, self.norm_eps)
