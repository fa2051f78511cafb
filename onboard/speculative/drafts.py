"""What each kind of draft proposes along a target trajectory, as `Windows` (acceptance.py): a draft model (its
teacher-forced logits at the target's positions), n-gram lookup (vLLM's `ngram`: what followed the latest earlier
occurrence of the context's longest suffix) and the checkpoint's MTP layers (mtp.py, one chained step per proposal).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onboard.errors import OnboardError
from onboard.findings import Finding, error
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


def ngram_windows(rows: list[TargetRows], temperature: float) -> tuple[list[Windows], float]:
    """(windows per trajectory, seconds per proposal lookup) of n-gram lookup."""
    started = time.perf_counter()
    proposals = [ngram_proposals(r.sequence, r.prompt_len) for r in rows]
    seconds = (time.perf_counter() - started) / max(sum(len(r.next_ids) for r in rows), 1)
    return [proposal_windows(r, p, temperature) for r, p in zip(rows, proposals)], seconds


def ngram_proposals(sequence: Sequence[int], prompt_len: int) -> list[list[int]]:
    """Per start t (context = sequence[: prompt_len + t]): up to MAX_K tokens copied after the most recent earlier
    occurrence of the context's longest suffix of NGRAM_MAX..NGRAM_MIN tokens (empty: no match)."""
    return [_lookup(sequence[:end]) for end in range(prompt_len, len(sequence))]


def _lookup(context: Sequence[int]) -> list[int]:
    for n in range(NGRAM_MAX, NGRAM_MIN - 1, -1):
        if len(context) <= n:
            continue
        suffix = list(context[-n:])
        for start in range(len(context) - n - 1, -1, -1):
            if list(context[start : start + n]) == suffix:
                return list(context[start + n : start + n + MAX_K])
    return []


def open_mtp(target: Any, folder: Path) -> Any:
    """The checkpoint's MTP draft on the target adapter, or a `mtp-draft-unavailable` finding saying why not."""
    from onboard.speculative import mtp

    if target.hf:
        return _mtp_unavailable("the target runs in transformers (no generated adapter), which does not run MTP heads")
    try:
        return mtp.load_mtp(folder, target.model)
    except OnboardError as exc:
        return _mtp_unavailable(exc.message)


def _mtp_unavailable(why: str) -> Finding:
    return error(
        "mtp-draft-unavailable",
        f"MTP self-draft not measured: {why}",
        "measure a draft model or ngram instead; MTP heads are loaded by the generated adapter (onboard generate)",
    )


def mtp_windows(target: Any, draft: Any, rows: list[TargetRows], temperature: float) -> tuple[list[Windows], float]:
    """(windows per trajectory, seconds per MTP step) of `open_mtp`'s draft."""
    import torch

    from onboard.speculative import mtp

    windows, steps, seconds = [], 0, 0.0
    with torch.no_grad():
        for row in rows:
            ids = torch.tensor([list(row.sequence)], device=target.device)
            _, hidden = mtp.target_hidden(target.model, ids)
            empty = row.logits[:0]  # no MTP input before the second token (a 1-token prompt): no proposal
            proposals, dists = [], []
            for t in range(len(row.next_ids)):
                start, depth = row.prompt_len + t - 2, min(MAX_K, len(row.next_ids) - t)
                if start < 0:
                    proposals.append([])
                    dists.append(empty)
                    continue
                began = time.perf_counter()
                chain = mtp.mtp_draft_chain(draft, hidden, ids, start, depth).float()
                seconds, steps = seconds + time.perf_counter() - began, steps + depth
                proposals.append(chain.argmax(-1).tolist())
                dists.append(chain)
            windows.append(proposal_windows(row, proposals, temperature, dists))
    return windows, seconds / max(steps, 1)
