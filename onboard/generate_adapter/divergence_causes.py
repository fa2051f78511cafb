"""Likely causes of a divergence, read from the error pattern at the first diverging point: small named functions
over the two activations ([positions, channels], float64), each a sentence or None. Hints ranked by specificity,
not verdicts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

# A fitted model of the error explains it when what is left is below this fraction of the error itself.
EXPLAINED = 0.01


def _rows(t: torch.Tensor) -> torch.Tensor:
    """[..., S, C] -> [S, C] (batch of one); routers are already [tokens, experts]."""
    t = t.detach().double().cpu()
    return t.reshape(-1, t.shape[-1]) if t.dim() >= 2 else t.reshape(1, -1)


def _residual(fit: torch.Tensor, ours: torch.Tensor, ref: torch.Tensor) -> float:
    """||ours - fit|| relative to ||ours - ref||: near 0 when the fitted model explains the whole error."""
    return float((ours - fit).norm() / (ours - ref).norm().clamp_min(1e-300))


# Reference points our blocks compute without a module of their own (the MoE block's stacked experts).
NO_MODULE_HERE = ("experts",)


def missing_modules(missing_before: Sequence[str]) -> str | None:
    """The reference ran modules here (same layer, earlier) that the adapter has no counterpart for."""
    missing_before = [m for m in missing_before if m not in NO_MODULE_HERE]
    if not missing_before:
        return None
    names = ", ".join(missing_before)
    if any(m in ("q_norm", "k_norm") for m in missing_before):
        return f"the reference applies {names} in this layer and the adapter does not: missing QK-norm"
    return f"the reference runs {names} in this layer and the adapter has no counterpart"


def constant_ratio(ours: torch.Tensor, ref: torch.Tensor, tol: float) -> str | None:
    """ours ≈ s·ref with one s for every element: a scale or multiplier applied or dropped."""
    a, b = _rows(ours), _rows(ref)
    s = float((a * b).sum() / (b * b).sum().clamp_min(1e-300))
    if abs(s - 1.0) <= tol or _residual(s * b, a, b) > EXPLAINED:
        return None
    return f"ratio ≈ constant (adapter/reference = {s:.4g}): a scale or multiplier"


def norm_offset(ours: torch.Tensor, ref: torch.Tensor, weight: torch.Tensor | None) -> str | None:
    """A norm scaling by w where the reference scales by 1 + w (Gemma) gives ours·(1 + w) = ref·w, and conversely."""
    if weight is None:
        return None
    a, b = _rows(ours), _rows(ref)
    w = weight.detach().double().cpu().reshape(-1)
    if w.numel() != a.shape[-1]:
        return None
    if _residual(b * w / (1 + w), a, b) <= EXPLAINED:
        return "≈ w / (1+w) per channel: the adapter scales by w where the reference uses 1+w (norm offset missing)"
    if _residual(b * (1 + w) / w, a, b) <= EXPLAINED:
        return "≈ (1+w) / w per channel: the adapter adds a +1 norm offset the reference does not have"
    return None


def per_channel_scale(ours: torch.Tensor, ref: torch.Tensor) -> str | None:
    """ours ≈ s_c·ref with one s per channel at every position: a per-channel weight."""
    a, b = _rows(ours), _rows(ref)
    if a.shape[0] < 2:
        return None
    s = (a * b).sum(0) / (b * b).sum(0).clamp_min(1e-300)
    if _residual(b * s, a, b) > EXPLAINED or float(s.std()) < 1e-3:
        return None
    return "ratio constant per channel across positions: a per-channel weight (norm weight or 1+w offset)"


def per_token_scale(ours: torch.Tensor, ref: torch.Tensor) -> str | None:
    """ours ≈ s_p·ref with one s per position, varying: a per-token weight (in an MoE block, the router's)."""
    a, b = _rows(ours), _rows(ref)
    if a.shape[0] < 2:
        return None
    s = (a * b).sum(-1) / (b * b).sum(-1).clamp_min(1e-300)
    if _residual(b * s[:, None], a, b) > EXPLAINED or float(s.std()) < 1e-3:
        return None
    return "ratio constant per token, varying across tokens: a per-token weight (MoE top-k normalisation or scaling)"


def _position_errors(ours: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    a, b = _rows(ours), _rows(ref)
    return (a - b).abs().amax(-1) / b.abs().max().clamp_min(1e-300)


def grows_with_position(
    ours_tables: Sequence[torch.Tensor], ref_tables: Sequence[torch.Tensor], tol: float
) -> str | None:
    """The rotary cos tables differ (a wrong base or scaling: exact at position 0, growing with p). transformers'
    tables repeat each frequency twice, as halves or interleaved ([S, R]); ours hold each once ([S, R/2])."""
    if not ours_tables or not ref_tables:
        return None

    def gap(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """Per-position max |Δcos| (inf when the layouts cannot be aligned)."""
        a, b = _rows(a), _rows(b)
        views = (b[:, : a.shape[-1]], b[:, ::2]) if b.shape[-1] == 2 * a.shape[-1] else (b,)
        gaps = [(a - v).abs().amax(-1) for v in views if v.shape == a.shape]
        return min(gaps, key=lambda g: float(g.max())) if gaps else torch.full((a.shape[0],), torch.inf)

    closest = [min((gap(a, b) for b in ref_tables), key=lambda g: float(g.max())) for a in ours_tables]
    wrong = [g for g in closest if float(g.max()) > tol]
    if not wrong:
        return None
    first = int((wrong[0] > tol).nonzero().flatten()[0])
    return f"rotary cos/sin tables differ from position {first} on, error grows with position: rope theta or scaling"


def scores_only(ours: torch.Tensor, ref: torch.Tensor, tol: float) -> str | None:
    """Exact at position 0 (which attends only to itself), wrong from position 1: the scores q·k differ."""
    e = _position_errors(ours, ref)
    if e.numel() < 2 or float(e[0]) > tol or float(e[1]) <= tol:
        return None
    return "exact at position 0, wrong from position 1: the attention scores differ (rope, QK-norm, scale, softcap)"


def past_position(ours: torch.Tensor, ref: torch.Tensor, tol: float) -> str | None:
    """Exact up to some position N ≥ 2, then wrong: a window, chunk or rope-scaling boundary."""
    e = _position_errors(ours, ref)
    bad = (e > tol).nonzero().flatten()
    if not bad.numel() or int(bad[0]) < 2:
        return None
    n = int(bad[0])
    return f"only positions ≥ {n} diverge: a window or chunk boundary at {n} (sliding window, chunking)"


@dataclass(frozen=True)
class Evidence:
    """What the captures hold besides the diverging point: the norm's weight, the reference's earlier points of this
    layer the adapter lacks, and every rotary cos table each side computed."""

    weight: torch.Tensor | None = None
    missing_before: Sequence[str] = ()
    ours_rotary: Sequence[torch.Tensor] = ()
    ref_rotary: Sequence[torch.Tensor] = ()


def likely_causes(ours: torch.Tensor, ref: torch.Tensor, tol: float, evidence: Evidence = Evidence()) -> list[str]:
    """Every heuristic that recognises the pattern, most specific first."""
    if ours.numel() != ref.numel():
        return [
            f"shapes differ ({tuple(ours.shape)} vs {tuple(ref.shape)}): a dimension read from the wrong config key"
        ]
    bad = int((~torch.isfinite(ours)).sum())
    if bad or not bool(torch.isfinite(ref).all()):
        peak = float(ref.detach().double().abs().max())
        side = f"{bad} non-finite values in the adapter" if bad else "non-finite values in the reference"
        return [f"{side} (largest |reference| here {peak:.3g}): an overflow of the dtype's range, or a division by 0"]
    ours = ours.reshape(ref.shape)
    offset = norm_offset(ours, ref, evidence.weight)
    checks: list[Callable[[], str | None]] = [
        lambda: missing_modules(evidence.missing_before),
        lambda: offset,
        lambda: constant_ratio(ours, ref, tol),
        lambda: grows_with_position(evidence.ours_rotary, evidence.ref_rotary, tol),
        lambda: past_position(ours, ref, tol),
        lambda: scores_only(ours, ref, tol),
        lambda: None if offset else per_channel_scale(ours, ref),
        lambda: per_token_scale(ours, ref),
    ]
    found = [c() for c in checks]
    return [f for f in found if f]
