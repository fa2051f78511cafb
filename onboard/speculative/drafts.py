"""What each kind of draft proposes along a target trajectory, as `Windows` (acceptance.py).

A trajectory is a prompt and the target's greedy continuation; `TargetRows` holds the target's logits at the N
positions that predict the continuation's tokens, teacher-forced (one forward). Three drafts:
- a draft model: its teacher-forced logits at the same positions (one forward). Its greedy proposal i from start t
  is its argmax at position t+i as long as proposals 1..i-1 were accepted (its context is then the trajectory's).
- n-gram lookup (vLLM's `ngram`, prompt lookup decoding): the longest suffix of the context, NGRAM_MAX tokens down to
  NGRAM_MIN, found earlier in the context; the tokens that followed it are the proposal. Deterministic: at
  temperature T a proposal is accepted with the target's probability of that token.
- MTP heads (DeepSeek-V3's `num_nextn_predict_layers`): onboard/speculative/mtp.py's chained greedy window per start.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from onboard.speculative.acceptance import MAX_K, Windows, overlap

NGRAM_MAX, NGRAM_MIN = 3, 1


@dataclass(frozen=True)
class TargetRows:
    sequence: tuple[int, ...]
    prompt_len: int
    logits: Any
    """(N, V) float32: the target's logits at positions prompt_len-1 .. len-2 (predicting continuation tokens)."""

    @property
    def next_ids(self) -> list[int]:
        return list(self.sequence[self.prompt_len :])

    def on_path(self) -> list[bool]:
        """The target's own argmax is the trajectory's next token (False only for goldens of another run)."""
        return [int(a) == b for a, b in zip(self.logits.argmax(-1).tolist(), self.next_ids)]


def _runs(accepted_at: Callable[[int, int], bool], n: int) -> tuple[int, ...]:
    """Per start t: proposals accepted in a row, proposal i checked by accepted_at(t, i)."""
    out = []
    for t in range(n):
        r = 0
        while r < MAX_K and t + r < n and accepted_at(t, r):
            r += 1
        out.append(r)
    return tuple(out)


def model_windows(target: TargetRows, draft_logits: Any, temperature: float) -> Windows:
    """A draft model's windows from its teacher-forced logits at the target's positions."""
    path = target.on_path()
    target_argmax = target.logits.argmax(-1).tolist()
    draft_argmax = draft_logits.argmax(-1).tolist()
    ok = [d == a and on for d, a, on in zip(draft_argmax, target_argmax, path)]
    n = len(ok)
    alpha = None
    if temperature > 0:
        row = overlap(target.logits, draft_logits, temperature).tolist()
        alpha = tuple(tuple(row[t + i] if t + i < n else 0.0 for i in range(MAX_K)) for t in range(n))
    return Windows(_runs(lambda t, i: ok[t + i], n), alpha, path.count(False))


def proposal_windows(
    target: TargetRows, proposals: Sequence[Sequence[int]], temperature: float, draft_rows: Sequence[Any] | None = None
) -> Windows:
    """Windows of a draft that proposes `proposals[t]` from start t (n-gram, MTP); `draft_rows[t]` are its logits
    for those proposals ((len, V)), or None for a deterministic draft (q is one-hot on the proposed token)."""
    import torch

    path = target.on_path()
    target_argmax = target.logits.argmax(-1).tolist()
    n = len(path)

    def accepted(t: int, i: int) -> bool:
        return i < len(proposals[t]) and proposals[t][i] == target_argmax[t + i] and path[t + i]

    alpha = None
    if temperature > 0:
        probs = torch.softmax(target.logits.float() / temperature, dim=-1)
        rows = []
        for t in range(n):
            depth = min(len(proposals[t]), n - t)
            if draft_rows is not None and depth:
                values = overlap(target.logits[t : t + depth], draft_rows[t][:depth], temperature).tolist()
            else:
                values = [float(probs[t + i, proposals[t][i]]) for i in range(depth)]
            rows.append(tuple(values) + (0.0,) * (MAX_K - depth))
        alpha = tuple(rows)
    return Windows(_runs(accepted, n), alpha, path.count(False))


def ngram_proposals(sequence: Sequence[int], prompt_len: int) -> list[list[int]]:
    """Per start t (context = sequence[: prompt_len + t]): up to MAX_K tokens copied after the most recent earlier
    occurrence of the context's longest suffix of NGRAM_MAX..NGRAM_MIN tokens (empty: no match)."""
    out = []
    for end in range(prompt_len, len(sequence)):
        context = sequence[:end]
        out.append(_lookup(context))
    return out


def _lookup(context: Sequence[int]) -> list[int]:
    for n in range(NGRAM_MAX, NGRAM_MIN - 1, -1):
        if len(context) <= n:
            continue
        suffix = list(context[-n:])
        for start in range(len(context) - n - 1, -1, -1):
            if list(context[start : start + n]) == suffix:
                return list(context[start + n : start + n + MAX_K])
    return []
