"""Independent checks for the llama.cpp K-quant port (onboard/quantize/ggml_kquants.py).

- `pack_q6_k` / `pack_q4_k`: the parts written as GGUF block bytes (block_q6_K / block_q4_K in ggml-common.h), so
  `gguf.quants.dequantize` of them can be compared with our dequantized values (storage layout and scale encoding).
- `scalar_q6_k` / `scalar_q4_k`: line-by-line transliterations of quantize_row_q6_K_ref / quantize_row_q4_K_ref and
  their helpers, one element at a time in numpy float32 (the vectorised port must agree with them).
"""

from __future__ import annotations

import numpy as np

F32 = np.float32


def nearest_int(v: np.float32) -> int:
    return int(np.rint(F32(v)))


def pack_q6_k(d: np.ndarray, scales: np.ndarray, q: np.ndarray) -> np.ndarray:
    blocks = []
    for b in range(q.shape[0]):
        L = q[b].astype(np.uint8)
        ql, qh = np.zeros(128, np.uint8), np.zeros(64, np.uint8)
        for half in range(2):
            j = 128 * half
            for k in range(32):
                ql[64 * half + k] = (L[j + k] & 0xF) | ((L[j + k + 64] & 0xF) << 4)
                ql[64 * half + k + 32] = (L[j + k + 32] & 0xF) | ((L[j + k + 96] & 0xF) << 4)
                qh[32 * half + k] = (
                    (L[j + k] >> 4)
                    | ((L[j + k + 32] >> 4) << 2)
                    | ((L[j + k + 64] >> 4) << 4)
                    | ((L[j + k + 96] >> 4) << 6)
                )
        sc = scales[b].astype(np.int8).view(np.uint8)
        blocks.append(np.concatenate([ql, qh, sc, np.array([d[b]], np.float16).view(np.uint8)]))
    return np.stack(blocks)


def pack_q4_k(d: np.ndarray, dmin: np.ndarray, scales: np.ndarray, mins: np.ndarray, q: np.ndarray) -> np.ndarray:
    blocks = []
    for b in range(q.shape[0]):
        packed = np.zeros(12, np.uint8)
        for j in range(8):
            ls, lm = int(scales[b, j]), int(mins[b, j])
            if j < 4:
                packed[j], packed[j + 4] = ls, lm
            else:
                packed[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4)
                packed[j - 4] |= (ls >> 4) << 6
                packed[j] |= (lm >> 4) << 6
        L = q[b].astype(np.uint8)
        qs = np.concatenate([L[j : j + 32] | (L[j + 32 : j + 64] << 4) for j in range(0, 256, 64)])
        head = np.array([d[b], dmin[b]], np.float16).view(np.uint8)
        blocks.append(np.concatenate([head, packed, qs]))
    return np.stack(blocks)


def _make_qx_quants(x: np.ndarray, nmax: int) -> tuple[np.float32, list[int]]:
    amax, peak = F32(0), F32(0)
    for v in x:
        if abs(v) > amax:
            amax, peak = F32(abs(v)), v
    if amax < F32(1e-15):
        return F32(0), [0] * len(x)
    iscale = F32(-nmax) / peak
    sumlx, suml2, L = F32(0), F32(0), []
    for v in x:
        k = max(-nmax, min(nmax - 1, nearest_int(iscale * v)))
        L.append(k + nmax)
        w = v * v
        sumlx += w * v * F32(k)
        suml2 += w * F32(k) * F32(k)
    scale = sumlx / suml2 if suml2 else F32(0)
    best = scale * sumlx
    for step in range(-9, 10):
        if step == 0:
            continue
        iscale = -(F32(nmax) + F32(0.1) * F32(step)) / peak
        sumlx, suml2 = F32(0), F32(0)
        for v in x:
            k = max(-nmax, min(nmax - 1, nearest_int(iscale * v)))
            w = v * v
            sumlx += w * v * F32(k)
            suml2 += w * F32(k) * F32(k)
        if suml2 > 0 and sumlx * sumlx > best * suml2:
            L = [nmax + max(-nmax, min(nmax - 1, nearest_int(iscale * v))) for v in x]
            scale = sumlx / suml2
            best = scale * sumlx
    return scale, L


def scalar_q6_k(x: np.ndarray) -> np.ndarray:
    out = np.zeros_like(x, dtype=F32)
    for b in range(x.shape[0] // 256):
        xb = x[256 * b : 256 * (b + 1)].astype(F32)
        scales, L = [], []
        for ib in range(16):
            s, k = _make_qx_quants(xb[16 * ib : 16 * ib + 16], 32)
            scales.append(s)
            L += k
        max_scale, max_abs = F32(0), F32(0)
        for s in scales:
            if abs(s) > max_abs:
                max_abs, max_scale = F32(abs(s)), s
        if max_abs < F32(1e-15):
            continue
        iscale = F32(-128) / max_scale
        d = F32(np.float16(F32(1) / iscale))
        sc = [min(127, nearest_int(iscale * s)) for s in scales]
        for j in range(16):
            dd = d * F32(sc[j])
            if not dd:
                continue
            for ii in range(16):
                L[16 * j + ii] = max(-32, min(31, nearest_int(xb[16 * j + ii] / dd))) + 32
        for i in range(256):
            out[256 * b + i] = d * F32(sc[i // 16]) * F32(L[i] - 32)
    return out


def _make_qkx2_quants(x: np.ndarray, weights: np.ndarray, nmax: int, rmin: float, rdelta: float, nstep: int):
    lo, hi = x[0], x[0]
    sum_w, sum_x = weights[0], weights[0] * x[0]
    for i in range(1, len(x)):
        lo, hi = min(lo, x[i]), max(hi, x[i])
        sum_w += weights[i]
        sum_x += weights[i] * x[i]
    if lo > 0:
        lo = F32(0)
    if hi == lo:
        return F32(0), -lo, [0] * len(x)
    iscale = F32(nmax) / (hi - lo)
    scale = F32(1) / iscale
    L = [max(0, min(nmax, nearest_int(iscale * (v - lo)))) for v in x]
    best = F32(0)
    for i, v in enumerate(x):
        best += weights[i] * (scale * F32(L[i]) + lo - v) ** 2
    for step in range(nstep + 1):
        iscale = (F32(rmin) + F32(rdelta) * F32(step) + F32(nmax)) / (hi - lo)
        aux = [max(0, min(nmax, nearest_int(iscale * (v - lo)))) for v in x]
        sum_l = sum_l2 = sum_xl = F32(0)
        for i, v in enumerate(x):
            sum_l += weights[i] * F32(aux[i])
            sum_l2 += weights[i] * F32(aux[i]) * F32(aux[i])
            sum_xl += weights[i] * F32(aux[i]) * v
        det = sum_w * sum_l2 - sum_l * sum_l
        if det > 0:
            this_scale = (sum_w * sum_xl - sum_x * sum_l) / det
            this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det
            if this_min > 0:
                this_min, this_scale = F32(0), sum_xl / sum_l2
            error = F32(0)
            for i, v in enumerate(x):
                error += weights[i] * (this_scale * F32(aux[i]) + this_min - v) ** 2
            if error < best:
                L, best, scale, lo = aux, error, this_scale, this_min
    return scale, -lo, L


def scalar_q4_k(x: np.ndarray) -> np.ndarray:
    out = np.zeros_like(x, dtype=F32)
    for b in range(x.shape[0] // 256):
        xb = x[256 * b : 256 * (b + 1)].astype(F32)
        scales, mins, L = [], [], []
        for j in range(8):
            sub = xb[32 * j : 32 * j + 32]
            av_x = np.sqrt(F32(np.sum(sub * sub, dtype=F32)) / F32(32))
            s, m, k = _make_qkx2_quants(sub, av_x + np.abs(sub), 15, -1.0, 0.1, 20)
            scales.append(s)
            mins.append(m)
            L += k
        max_scale = max([F32(0)] + scales)
        max_min = max([F32(0)] + mins)
        inv_scale = F32(63) / max_scale if max_scale > 0 else F32(0)
        inv_min = F32(63) / max_min if max_min > 0 else F32(0)
        ls = [min(63, nearest_int(inv_scale * s)) for s in scales]
        lm = [min(63, nearest_int(inv_min * m)) for m in mins]
        d, dmin = F32(np.float16(max_scale / F32(63))), F32(np.float16(max_min / F32(63)))
        for j in range(8):
            dd = d * F32(ls[j])
            if not dd:
                continue
            dm = dmin * F32(lm[j])
            for ii in range(32):
                L[32 * j + ii] = max(0, min(15, nearest_int((xb[32 * j + ii] + dm) / dd)))
        for i in range(256):
            out[256 * b + i] = d * F32(ls[i // 32]) * F32(L[i]) - dmin * F32(lm[i // 32])
    return out
