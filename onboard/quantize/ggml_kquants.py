"""llama.cpp's quantizers as `llama-quantize` runs them without an importance matrix, for machines without its library.

Q8_0 and the other 32-blocks: the `gguf` package's own quantizers. Q6_K and Q4_K (gguf only dequantizes them):
`quantize_row_q6_K_ref` / `quantize_row_q4_K_ref` ported, vectorised over blocks, in float32 with each sum in C's
order. Activations: the CPU backend rounds a matmul's input to Q8_0 blocks (Q8_K for the K-quants).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

QK_K = 256
GROUP_MAX_EPS = 1e-15


def fp16(x: torch.Tensor) -> torch.Tensor:
    """Rounded to float16 and back (a stored float16 scale; F16 weights and their matmul inputs)."""
    return x.to(torch.float16).to(torch.float32)


def via_gguf(w: torch.Tensor, type_name: str) -> torch.Tensor:
    """dequantize(quantize(w)) with the gguf package (rows of the last dimension, as llama.cpp stores them)."""
    import numpy as np
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize, quantize

    qtype = GGMLQuantizationType[type_name.upper()]
    rows = w.reshape(-1, w.shape[-1]).numpy().astype(np.float32, copy=False)
    out = dequantize(quantize(rows, qtype), qtype)
    return torch.from_numpy(np.ascontiguousarray(out)).reshape(w.shape)


def _ordered_sum(t: torch.Tensor) -> torch.Tensor:
    """Sum over the last dimension one element after another, in float32, as the C loops accumulate (torch's own
    sum adds in another order, and a scale search that compares near-equal errors then picks another scale)."""
    columns = t.unbind(-1)
    total = columns[0].clone()
    for column in columns[1:]:
        total += column
    return total


def _make_qx_quants(x: torch.Tensor, nmax: int) -> tuple[torch.Tensor, torch.Tensor]:
    """make_qx_quants(n, nmax, x, L, rmse_type=1, qw=NULL) for rows of x: (scale [B], L [B, n] in 0..2*nmax-1)."""
    amax, where = x.abs().max(dim=-1)
    peak = x.gather(-1, where.unsqueeze(-1)).squeeze(-1)
    zero = amax < GROUP_MAX_EPS
    peak = torch.where(zero, torch.ones_like(peak), peak)
    weight = x * x

    def attempt(iscale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        level = torch.clamp(torch.round(iscale.unsqueeze(-1) * x), -nmax, nmax - 1)
        return level, _ordered_sum(weight * x * level), _ordered_sum(weight * level * level)

    level, sumlx, suml2 = attempt(-nmax / peak)
    scale = torch.where(suml2 > 0, sumlx / torch.where(suml2 > 0, suml2, 1.0), torch.zeros_like(sumlx))
    best = scale * sumlx
    for step in range(-9, 10):
        if step == 0:
            continue
        cand, sumlx, suml2 = attempt(-(nmax + torch.tensor(0.1, dtype=torch.float32) * step) / peak)
        better = (suml2 > 0) & (sumlx * sumlx > best * suml2)
        level = torch.where(better.unsqueeze(-1), cand, level)
        scale = torch.where(better, sumlx / torch.where(suml2 > 0, suml2, 1.0), scale)
        best = torch.where(better, scale * sumlx, best)
    scale = torch.where(zero, torch.zeros_like(scale), scale)
    level = torch.where(zero.unsqueeze(-1), torch.full_like(level, -nmax), level)
    return scale, level + nmax


def _make_qkx2_quants(
    x: torch.Tensor, weights: torch.Tensor, nmax: int, rmin: float, rdelta: float, nstep: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """make_qkx2_quants(..., use_mad=false) for rows of x: (scale, the_min >= 0, L in 0..nmax)."""
    lo = x.min(dim=-1).values.clamp(max=0.0)
    hi = x.max(dim=-1).values
    flat = hi == lo
    sum_w, weighted_x = _ordered_sum(weights), weights * x
    sum_x = _ordered_sum(weighted_x)

    def levels(iscale: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
        return (x - offset.unsqueeze(-1)).mul_(iscale.unsqueeze(-1)).round_().clamp_(0, nmax)

    def error(scale: torch.Tensor, offset: torch.Tensor, level: torch.Tensor) -> torch.Tensor:
        diff = (level * scale.unsqueeze(-1)).add_(offset.unsqueeze(-1)).sub_(x)  # (s * l + min) - x, as in C
        return _ordered_sum(diff.mul_(diff).mul_(weights))

    # The levels of the best fit are rebuilt at the end from the (iscale, offset) that produced them.
    best_iscale = nmax / torch.where(flat, torch.ones_like(hi), hi - lo)
    best_offset_used = lo
    scale, offset = 1 / best_iscale, lo
    best = error(scale, lo, levels(best_iscale, lo))
    for step in range(nstep + 1):
        # As in C, a better fit's min is used by the following steps (both the span and the offset).
        span = torch.where(flat, torch.ones_like(hi), hi - offset)
        iscale = (rmin + torch.tensor(rdelta, dtype=torch.float32) * step + nmax) / span
        aux = levels(iscale, offset)
        weighted = weights * aux
        sum_l, sum_l2, sum_xl = _ordered_sum(weighted), _ordered_sum(weighted * aux), _ordered_sum(weighted * x)
        det = sum_w * sum_l2 - sum_l * sum_l
        ok = det > 0
        safe_det = torch.where(ok, det, torch.ones_like(det))
        this_scale = (sum_w * sum_xl - sum_x * sum_l) / safe_det
        this_min = (sum_l2 * sum_x - sum_l * sum_xl) / safe_det
        positive = this_min > 0
        this_scale = torch.where(positive, sum_xl / torch.where(sum_l2 > 0, sum_l2, 1.0), this_scale)
        this_min = torch.where(positive, torch.zeros_like(this_min), this_min)
        current = error(this_scale, this_min, aux)
        better = ok & (current < best)
        best = torch.where(better, current, best)
        best_iscale = torch.where(better, iscale, best_iscale)
        best_offset_used = torch.where(better, offset, best_offset_used)
        scale = torch.where(better, this_scale, scale)
        offset = torch.where(better, this_min, offset)
    level = levels(best_iscale, best_offset_used)
    scale = torch.where(flat, torch.zeros_like(scale), scale)
    level = torch.where(flat.unsqueeze(-1), torch.zeros_like(level), level)
    return scale, torch.where(flat, -lo, -offset), level


@dataclass(frozen=True)
class Q6KParts:
    d: torch.Tensor  # [B] float16 super-block scale (as float32)
    scales: torch.Tensor  # [B, 16] int8 sub-block scales
    q: torch.Tensor  # [B, 256] 0..63 (stored value + 32)


def q6_k_parts(x: torch.Tensor) -> Q6KParts:
    """quantize_row_q6_K_ref over rows of 256 values."""
    blocks = x.reshape(-1, QK_K)
    sub = blocks.reshape(-1, 16)
    sub_scale, sub_level = _make_qx_quants(sub, 32)
    sub_scale, sub_level = sub_scale.reshape(-1, 16), sub_level.reshape(-1, QK_K)
    max_abs, where = sub_scale.abs().max(dim=-1)
    max_scale = sub_scale.gather(-1, where.unsqueeze(-1)).squeeze(-1)
    empty = max_abs < GROUP_MAX_EPS
    iscale = -128.0 / torch.where(empty, torch.ones_like(max_scale), max_scale)
    d = torch.where(empty, torch.zeros_like(iscale), fp16(1 / iscale))
    scales = torch.clamp(torch.round(iscale.unsqueeze(-1) * sub_scale), max=127)
    scales = torch.where(empty.unsqueeze(-1), torch.zeros_like(scales), scales)
    step = (d.unsqueeze(-1) * scales).repeat_interleave(16, dim=-1)
    safe = torch.where(step != 0, step, torch.ones_like(step))
    level = torch.clamp(torch.round(blocks / safe), -32, 31) + 32
    q = torch.where(step != 0, level, sub_level)  # llama.cpp keeps make_qx_quants' L where the scale is 0
    q = torch.where(empty.unsqueeze(-1), torch.zeros_like(q), q)  # an all-zero block is stored as zeros
    return Q6KParts(d, scales, q)


def q6_k_dequant(parts: Q6KParts) -> torch.Tensor:
    step = (parts.d.unsqueeze(-1) * parts.scales).repeat_interleave(16, dim=-1)
    return step * (parts.q - 32)


@dataclass(frozen=True)
class Q4KParts:
    d: torch.Tensor  # [B] float16
    dmin: torch.Tensor  # [B] float16
    scales: torch.Tensor  # [B, 8] 0..63
    mins: torch.Tensor  # [B, 8] 0..63
    q: torch.Tensor  # [B, 256] 0..15


def q4_k_parts(x: torch.Tensor) -> Q4KParts:
    """quantize_row_q4_K_ref over rows of 256 values."""
    blocks = x.reshape(-1, QK_K)
    sub = blocks.reshape(-1, 32)
    av_x = torch.sqrt(_ordered_sum(sub * sub).unsqueeze(-1) / 32)
    sub_scale, sub_min, sub_level = _make_qkx2_quants(sub, av_x + sub.abs(), 15, -1.0, 0.1, 20)
    sub_scale, sub_min = sub_scale.reshape(-1, 8), sub_min.reshape(-1, 8)
    max_scale = sub_scale.amax(dim=-1).clamp(min=0.0)
    max_min = sub_min.amax(dim=-1).clamp(min=0.0)
    inv_scale = torch.where(
        max_scale > 0, 63.0 / torch.where(max_scale > 0, max_scale, 1.0), torch.zeros_like(max_scale)
    )
    inv_min = torch.where(max_min > 0, 63.0 / torch.where(max_min > 0, max_min, 1.0), torch.zeros_like(max_min))
    scales = torch.clamp(torch.round(inv_scale.unsqueeze(-1) * sub_scale), 0, 63)
    mins = torch.clamp(torch.round(inv_min.unsqueeze(-1) * sub_min), 0, 63)
    d, dmin = fp16(max_scale / 63.0), fp16(max_min / 63.0)
    step = (d.unsqueeze(-1) * scales).repeat_interleave(32, dim=-1)
    shift = (dmin.unsqueeze(-1) * mins).repeat_interleave(32, dim=-1)
    safe = torch.where(step != 0, step, torch.ones_like(step))
    level = torch.clamp(torch.round((blocks + shift) / safe), 0, 15)
    q = torch.where(step != 0, level, sub_level.reshape(-1, QK_K))  # as in C: L from make_qkx2_quants stays
    return Q4KParts(d, dmin, scales, mins, q)


def q4_k_dequant(parts: Q4KParts) -> torch.Tensor:
    step = (parts.d.unsqueeze(-1) * parts.scales).repeat_interleave(32, dim=-1)
    shift = (parts.dmin.unsqueeze(-1) * parts.mins).repeat_interleave(32, dim=-1)
    return step * parts.q - shift


def q6_k(w: torch.Tensor) -> torch.Tensor:
    return q6_k_dequant(q6_k_parts(w)).reshape(w.shape)


def q4_k(w: torch.Tensor) -> torch.Tensor:
    return q4_k_dequant(q4_k_parts(w)).reshape(w.shape)


def q8_0_activation(x: torch.Tensor) -> torch.Tensor:
    """quantize_row_q8_0: blocks of 32, scale amax / 127 stored as float16 (the SIMD path rounds half to even)."""
    shaped = x.reshape(*x.shape[:-1], x.shape[-1] // 32, 32)
    d = shaped.abs().amax(dim=-1, keepdim=True) / 127
    inv = torch.where(d > 0, 1 / torch.where(d > 0, d, 1.0), torch.zeros_like(d))
    return (torch.round(shaped * inv) * fp16(d)).reshape(x.shape)


def q8_k_activation(x: torch.Tensor) -> torch.Tensor:
    """quantize_row_q8_K: blocks of 256, iscale -127 / (the value of largest magnitude), float32 scale."""
    shaped = x.reshape(*x.shape[:-1], x.shape[-1] // QK_K, QK_K)
    amax, where = shaped.abs().max(dim=-1, keepdim=True)
    peak = shaped.gather(-1, where)
    iscale = -127.0 / torch.where(amax > 0, peak, torch.ones_like(peak))
    q = torch.clamp(torch.round(iscale * shaped), max=127)
    return torch.where(amax > 0, q * (1 / iscale), torch.zeros_like(shaped)).reshape(x.shape)
