"""Acceptance of a draft's proposals, from its windows along the target's greedy trajectories.

Greedy: `runs[t]` proposals from start t are accepted (exact, the draft's context being the trajectory while they
agree), and accepted lengths per k come from simulating the decode loop as transformers' assisted generation runs
it. At temperature T, `alpha[t][i]` is sum(min(p, q)): the probability that proposal i of window t is accepted.
Expected speedup per window k (Leviathan et al. 2023): speedup(k) = (1 - alpha^(k+1)) / ((1 - alpha) (c k + 1)), c
the measured cost of a draft step in target steps; `measured` is the same with the simulated token count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

MAX_K = 8
STEPS, REPEATS = 8, 2  # decode_step_seconds


@dataclass(frozen=True)
class Windows:
    """One draft along one target trajectory of N generated tokens: per start t (0..N-1)."""

    runs: tuple[int, ...]
    """Greedy: proposals accepted from start t (0..MAX_K)."""
    alpha: tuple[tuple[float, ...], ...] | None
    """Temperature T: acceptance probability of proposal i (0..MAX_K-1) from start t; None when T = 0."""
    departures: int = 0
    """Positions where the target's own argmax is not the trajectory's token (goldens of another dtype or library):
    a window cannot continue past them."""

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


def sampled_table(all_windows: Sequence[Windows], ks: Sequence[int]) -> list[dict[str, Any]]:
    """Per k: expected accepted proposals per step over the starts with room for a full window of k (None when no
    trajectory is long enough)."""
    rows = []
    for k in ks:
        sums = [sum(_chain(w, t, k, False)) for w in all_windows for t in range(len(w.runs)) if w.room(t) >= k]
        mean = sum(sums) / len(sums) if sums else None
        rows.append(
            {"k": k, "windows": len(sums), "mean_accepted": mean, "tokens_per_step": None if mean is None else 1 + mean}
        )
    return rows


def _chain(w: Windows, t: int, depth: int, greedy: bool) -> list[float]:
    """P(proposals 1..i all accepted) from start t, for i = 1..depth (0 or 1 when greedy)."""
    if greedy:
        return [float(w.runs[t] >= i) for i in range(1, depth + 1)]
    out, p = [], 1.0
    for i in range(depth):
        p *= w.alpha[t][i] if w.alpha is not None else 0.0
        out.append(p)
    return out


def by_position(all_windows: Sequence[Windows], greedy: bool) -> list[dict[str, Any]]:
    """Per window position i (1..MAX_K), over every start with room for it: how often proposal i is accepted, given
    the i-1 before it were (`rate`), and at all (`cumulative`); greedy also counts them."""
    rows = []
    for i in range(1, MAX_K + 1):
        chains = [_chain(w, t, i, greedy) for w in all_windows for t in range(len(w.runs)) if w.room(t) >= i]
        accepted = sum(c[-1] for c in chains)
        reached = sum(c[-2] if i > 1 else 1.0 for c in chains)
        row: dict[str, Any] = {"position": i, "windows": len(chains)}
        if greedy:
            row.update(reached=int(reached), accepted=int(accepted))
        row["rate"] = accepted / reached if reached else None
        row["cumulative"] = accepted / len(chains) if chains else None
        rows.append(row)
    return rows


def alpha(all_windows: Sequence[Windows], greedy: bool) -> float:
    """Per-token acceptance: the mean probability that a window's first proposal is accepted."""
    firsts = [
        _chain(w, t, 1, greedy)[0]
        for w in all_windows
        if greedy or w.alpha is not None
        for t in range(len(w.runs))
        if w.room(t) >= 1
    ]
    return sum(firsts) / len(firsts) if firsts else 0.0


def overlap(target_logits: Any, draft_logits: Any, temperature: float) -> Any:
    """sum over the vocabulary of min(p, q) per row: the probability that speculative sampling accepts the draft's
    token (Leviathan et al. 2023). Draft ids past the target's vocabulary carry mass the target never accepts."""
    import torch

    p = torch.softmax(target_logits.float() / temperature, dim=-1)
    q = torch.softmax(draft_logits.float() / temperature, dim=-1)
    width = min(p.shape[-1], q.shape[-1])
    return torch.minimum(p[..., :width], q[..., :width]).sum(-1)


def model_speedup(alpha: float, k: int, c: float) -> float:
    tokens = k + 1.0 if alpha >= 1.0 else (1.0 - alpha ** (k + 1)) / (1.0 - alpha)
    return tokens / (c * k + 1.0)


def speedup_rows(alpha: float, tokens_per_step: dict[int, float | None], c: float) -> list[dict[str, Any]]:
    """Per k: the model's speedup and the measured one (None where k was not measured)."""
    return [
        {"k": k, "model": model_speedup(alpha, k, c), "measured": None if tokens is None else tokens / (c * k + 1)}
        for k, tokens in sorted(tokens_per_step.items())
    ]


def recommended_k(rows: Sequence[dict[str, Any]]) -> int | None:
    """The k with the largest measured speedup (the smaller k on a tie); None when no k is faster than plain decoding."""
    measured = [r for r in rows if r["measured"] is not None]
    best = max(measured, key=lambda r: (round(r["measured"], 6), -r["k"]), default=None)
    return best["k"] if best is not None and best["measured"] > 1.0 else None


def describe_k(k: int | None) -> str:
    """recommended_k in words: the k, or why there is none."""
    return str(k) if k else "none (no k is faster)"


def decode_step_seconds(candidate: Any, prompt: Sequence[int]) -> float:
    """One KV-cached greedy decode step of an in-process candidate (prefill excluded)."""
    best = float("inf")
    for _ in range(REPEATS):
        _, first = candidate.timed_batch([prompt], 1)
        _, more = candidate.timed_batch([prompt], 1 + STEPS)
        best = min(best, max(more - first, 0.0) / STEPS)
    return best
