"""Worker-side: the repository's own model (trust_remote_code=True) as the reference, returning logits.

Runs only inside the sandbox worker (run_isolated("onboard.sandbox.causal_lm:logits", ...)): the one place where
transformers may import a repository's code. Timings are measured here, inside the worker, so process start and
imports do not count towards the forward.
"""

from __future__ import annotations

import time
from typing import Any

from onboard.sandbox.protocol import require_worker


def logits(
    checkpoint: str,
    input_ids: list[list[int]],
    dtype: str = "float32",
    repeats: int = 1,
    attn_implementation: str | None = None,
) -> dict[str, Any]:
    """Load `checkpoint` with AutoModelForCausalLM and return the logits of `input_ids` (batch x seq).

    Args:
        checkpoint: the checkpoint folder (read-only in the worker).
        input_ids: rows of equal length.
        dtype: torch dtype name the model is loaded and run in.
        repeats: forwards to time (the logits are the last one's; all are the same input).
        attn_implementation: passed to from_pretrained when given ("eager", "sdpa").

    Returns:
        {"logits": tensor [batch, seq, vocab], "load_s": float, "forward_s": [float] * repeats,
         "threads": torch threads used, "transformers": version}
    """
    require_worker("onboard.sandbox.causal_lm.logits")
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    start = time.perf_counter()
    extra = {"attn_implementation": attn_implementation} if attn_implementation else {}
    # trust_remote_code=True only here: this runs inside the sandbox worker (require_worker above).
    model = AutoModelForCausalLM.from_pretrained(
        checkpoint, trust_remote_code=True, dtype=getattr(torch, dtype), local_files_only=True, **extra
    )
    model = model.eval()
    load_s = time.perf_counter() - start
    ids = torch.tensor(input_ids, dtype=torch.long)
    forward_s = []
    with torch.inference_mode():
        for _ in range(max(1, repeats)):
            start = time.perf_counter()
            out = model(input_ids=ids).logits
            forward_s.append(time.perf_counter() - start)
    return {
        "logits": out,
        "load_s": load_s,
        "forward_s": forward_s,
        "threads": torch.get_num_threads(),
        "transformers": transformers.__version__,
    }
