"""Expected speedup of speculative decoding per window k, on this machine: the standard model (Leviathan et al.
2023), speedup(k) = (1 - alpha^(k+1)) / ((1 - alpha) (c k + 1)) with c the measured cost of a draft step in target
steps, and `measured`, the same with the simulated token count (acceptance.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

STEPS, REPEATS = 8, 2


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
