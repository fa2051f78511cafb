"""The checkpoint's own MTP heads as a self-draft: windows from onboard/speculative/mtp.py's greedy chains.

From start t (context = the trajectory up to token P+t-1) the engine drafts with the target's hidden state at P+t-2
and token P+t-1: `mtp_draft_chain(draft, hidden, ids, P+t-2, k)` gives the k proposals' distributions (one MTP step
each, recycling its own output). What cannot run is a finding naming the reason, never a crash.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from onboard.errors import OnboardError
from onboard.findings import Finding, error
from onboard.speculative.acceptance import MAX_K, Windows
from onboard.speculative.drafts import TargetRows, proposal_windows

HINT = "measure a draft model or ngram instead; MTP heads are loaded by the generated adapter (onboard generate)"


def open_mtp(target: Any, folder: Path) -> Any:
    """The checkpoint's MTP draft on the target adapter, or a `mtp-draft-unavailable` finding saying why not."""
    try:
        from onboard.speculative import mtp
    except ImportError as exc:
        return _unavailable(f"the MTP module is not available in this build ({exc})")
    if target.hf:
        return _unavailable("the target runs in transformers (no generated adapter), which does not run MTP heads")
    try:
        return mtp.load_mtp(folder, target.model)
    except OnboardError as exc:
        return _unavailable(exc.message)


def mtp_windows(target: Any, draft: Any, rows: list[TargetRows], temperature: float) -> tuple[list[Windows], float]:
    """(windows per trajectory, seconds per MTP step) of `open_mtp`'s draft."""
    import torch

    from onboard.speculative import mtp

    windows, steps, seconds = [], 0, 0.0
    with torch.no_grad():
        for row in rows:
            ids = torch.tensor([list(row.sequence)], device=target.device)
            _, hidden = mtp.target_hidden(target.model, ids)
            proposals, dists = [], []
            for t in range(len(row.next_ids)):
                start, depth = row.prompt_len + t - 2, min(MAX_K, len(row.next_ids) - t)
                if start < 0:
                    proposals.append([])
                    dists.append(None)
                    continue
                began = time.perf_counter()
                chain = mtp.mtp_draft_chain(draft, hidden, ids, start, depth).float()
                seconds, steps = seconds + time.perf_counter() - began, steps + depth
                proposals.append(chain.argmax(-1).tolist())
                dists.append(chain)
            windows.append(proposal_windows(row, proposals, temperature, _filled(dists, row)))
    return windows, seconds / max(steps, 1)


def _filled(dists: list[Any], row: TargetRows) -> list[Any]:
    """A start with no MTP input (the first token after a 1-token prompt) proposes nothing: an empty (0, V) block."""
    empty = row.logits[:0]
    return [d if d is not None else empty for d in dists]


def _unavailable(why: str) -> Finding:
    return error("mtp-draft-unavailable", f"MTP self-draft not measured: {why}", HINT)
