"""Acceptance of a draft's proposals, from its windows along the target's greedy trajectories.

A window starts after t generated tokens: the draft proposes up to k tokens, the target verifies them in one step,
keeps the longest agreeing prefix and adds one token of its own. Greedy: `runs[t]` is how many proposals from start t
the target accepts (exact: while they agree, the draft's context is the target's trajectory), so mean accepted
lengths for every k come from simulating the decode loop over `runs` (as transformers' assisted generation runs it:
a window never reaches past the last token). At temperature T, `alpha[t][i]` is the probability that proposal i of
window t is accepted, sum over the vocabulary of min(p, q) of the target's and the draft's distributions at that
position (exact per token; along a window the contexts are the trajectory's, the usual approximation).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

MAX_K = 8


@dataclass(frozen=True)
class Windows:
    """One draft along one target trajectory of N generated tokens: per start t (0..N-1)."""

    runs: tuple[int, ...]
    """Greedy: proposals accepted from start t (0..MAX_K)."""
    alpha: tuple[tuple[float, ...], ...] | None
    """Temperature T: acceptance probability of proposal i (0..MAX_K-1) from start t; None when T = 0."""
    departures: int = 0
    """Positions where the target's own argmax is not the trajectory's token (goldens of another dtype or
    library): a window cannot continue past them (counted as a rejection)."""

    def room(self, t: int) -> int:
        """Largest window at start t: the target's own token must still fit (transformers: max_length - len - 1)."""
        return min(MAX_K, len(self.runs) - t - 1)


def simulate(windows: Windows, k: int) -> tuple[int, int]:
    """(target steps, accepted draft tokens) of greedy speculative decoding with window k along the trajectory."""
    t = steps = accepted = 0
    n = len(windows.runs)
    while t < n:
        a = min(windows.runs[t], k, n - t - 1)
        steps, accepted, t = steps + 1, accepted + a, t + a + 1
    return steps, accepted


def greedy_table(all_windows: Sequence[Windows], ks: Sequence[int]) -> list[dict[str, Any]]:
    """Per k: target steps, accepted tokens, mean accepted length per step and tokens per target step."""
    rows = []
    for k in ks:
        steps = accepted = 0
        for w in all_windows:
            s, a = simulate(w, k)
            steps, accepted = steps + s, accepted + a
        rows.append(
            {
                "k": k,
                "steps": steps,
                "accepted": accepted,
                "tokens": steps + accepted,
                "mean_accepted": accepted / steps if steps else 0.0,
                "tokens_per_step": (steps + accepted) / steps if steps else 0.0,
            }
        )
    return rows


def greedy_by_position(all_windows: Sequence[Windows]) -> list[dict[str, Any]]:
    """Per window position i (1..MAX_K), over every start with room for it: how often proposal i is accepted, given
    the i-1 before it were (`rate`), and at all (`cumulative`)."""
    rows = []
    for i in range(1, MAX_K + 1):
        starts = [(w, t) for w in all_windows for t in range(len(w.runs)) if w.room(t) >= i]
        reached = [w.runs[t] >= i - 1 for w, t in starts]
        hit = [w.runs[t] >= i for w, t in starts]
        rows.append(
            {
                "position": i,
                "windows": len(starts),
                "reached": sum(reached),
                "accepted": sum(hit),
                "rate": sum(hit) / sum(reached) if sum(reached) else None,
                "cumulative": sum(hit) / len(starts) if starts else None,
            }
        )
    return rows


def greedy_alpha(all_windows: Sequence[Windows]) -> float:
    """Per-token greedy acceptance: the fraction of starts whose first proposal is accepted."""
    firsts = [w.runs[t] >= 1 for w in all_windows for t in range(len(w.runs)) if w.room(t) >= 1]
    return sum(firsts) / len(firsts) if firsts else 0.0


def _products(w: Windows, t: int, depth: int) -> list[float]:
    """P(proposals 1..i all accepted) for i = 1..depth from start t."""
    out, p = [], 1.0
    for i in range(depth):
        p *= w.alpha[t][i] if w.alpha is not None else 0.0
        out.append(p)
    return out


def sampled_table(all_windows: Sequence[Windows], ks: Sequence[int]) -> list[dict[str, Any]]:
    """Per k: expected accepted proposals per step, over the starts with room for a full window of k (None when
    no trajectory is long enough: --max-new-tokens above k)."""
    rows = []
    for k in ks:
        sums = [sum(_products(w, t, k)) for w in all_windows for t in range(len(w.runs)) if w.room(t) >= k]
        mean = sum(sums) / len(sums) if sums else None  # no trajectory long enough for a window of k: unmeasured
        rows.append(
            {
                "k": k,
                "windows": len(sums),
                "mean_accepted": mean,
                "tokens_per_step": None if mean is None else 1.0 + mean,
            }
        )
    return rows


def sampled_by_position(all_windows: Sequence[Windows]) -> list[dict[str, Any]]:
    rows = []
    for i in range(1, MAX_K + 1):
        chains = [_products(w, t, i) for w in all_windows for t in range(len(w.runs)) if w.room(t) >= i]
        upto = sum(c[-1] for c in chains)
        before = sum(c[-2] if i > 1 else 1.0 for c in chains)
        rows.append(
            {
                "position": i,
                "windows": len(chains),
                "rate": upto / before if before else None,
                "cumulative": upto / len(chains) if chains else None,
            }
        )
    return rows


def sampled_alpha(all_windows: Sequence[Windows]) -> float:
    """Mean per-token acceptance probability sum(min(p, q)) over every position of every trajectory."""
    values = [w.alpha[t][0] for w in all_windows if w.alpha is not None for t in range(len(w.runs)) if w.room(t) >= 1]
    return sum(values) / len(values) if values else 0.0


def overlap(target_logits: Any, draft_logits: Any, temperature: float) -> Any:
    """sum over the vocabulary of min(p, q) per row: the probability that speculative sampling accepts the draft's
    token (Leviathan et al. 2023). Draft ids past the target's vocabulary carry mass the target never accepts."""
    import torch

    p = torch.softmax(target_logits.float() / temperature, dim=-1)
    q = torch.softmax(draft_logits.float() / temperature, dim=-1)
    width = min(p.shape[-1], q.shape[-1])
    return torch.minimum(p[..., :width], q[..., :width]).sum(-1)
