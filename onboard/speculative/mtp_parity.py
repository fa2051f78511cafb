"""Parity of the MTP draft (mtp.py) against transformers' `MtpModel`, the reference where one exists.

transformers (>= 5.2x) implements MTP generically (`transformers.modeling_layers.MtpModel`, used by
`generate(..., use_mtp=True)`) for configs with `num_mtp_layers`; it finds the MTP tensors through the main model's
`_keys_to_ignore_on_load_unexpected`, which DeepSeek-V3 hard-codes to layer 61 (the full-size model's). Here the
reference is pointed at this checkpoint's MTP indices instead (same renaming rules, other layer number), so a
smaller DeepSeek-V3-shaped checkpoint is checked too. Where transformers does not implement the family (or MTP at
all) the result is "unverified" and says what would verify it (the engine's own MTP through
`onboard validate --speculative mtp`).

Metric: the first MTP depth, teacher-forced over the parity prompts (onboard.generate_adapter.parity), float32,
max|Δlogit| / max|reference logit| within parity's float32 tolerance.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from onboard.generate_adapter.parity import TOLERANCES, parity_config, prompts, reference_model, unverified
from onboard.reference import BUILTIN, reference_for
from onboard.speculative.mtp import load_mtp, mtp_depths, mtp_draft_logits, target_hidden

_VERIFY_ELSEWHERE = (
    "serve the checkpoint with `onboard validate --speculative mtp` on an engine that implements the family's MTP "
    "(vLLM's deepseek_mtp.py for DeepSeek-V3) and compare the engine's acceptance with draft-check's"
)


def mtp_parity(checkpoint: str | Path, adapter_cls: Any) -> dict[str, Any]:
    """Compare the MTP draft built by `adapter_cls` (a generated adapter's `Model`) with transformers' in float32."""
    path = Path(checkpoint)
    reference = reference_for(path)
    if reference.kind != BUILTIN:
        return unverified("float32", f"transformers does not implement {reference.model_type!r}; {_VERIFY_ELSEWHERE}")
    try:
        from transformers.modeling_layers import MtpModel
    except ImportError:
        return unverified("float32", f"the installed transformers has no MtpModel; {_VERIFY_ELSEWHERE}")
    main = reference_model(path, torch.float32)
    if getattr(main.config.get_text_config(), "num_mtp_layers", None) is None:
        return unverified("float32", f"transformers' {type(main).__name__} declares no MTP; {_VERIFY_ELSEWHERE}")
    target = adapter_cls.from_pretrained(path, torch.float32, trust_remote_code=False)
    draft = load_mtp(path, target)
    first = target.args.num_hidden_layers
    main._keys_to_ignore_on_load_unexpected = [
        rf"model\.layers\.{i}\..*" for i in range(first, first + mtp_depths(target.args))
    ]
    # Loads only the MTP tensors of the folder the builtin `main` came from (transformers' own MtpModel, no
    # repository code); trust_remote_code is stated anyway, as at every load site.
    reference_mtp = MtpModel.from_pretrained(main, trust_remote_code=False).eval()
    worst = 0.0
    with torch.no_grad():
        for ids in prompts(parity_config(path)):
            ref = _reference_logits(main, reference_mtp, ids)
            ours = mtp_draft_logits(draft, target_hidden(target, ids)[1], ids)
            worst = max(worst, float((ours - ref).abs().max()) / max(float(ref.abs().max()), 1e-30))
    tolerance = TOLERANCES["float32"]
    passed = worst <= tolerance
    return {"passed": passed, "status": "passed" if passed else "failed", "dtype": "float32", "worst": worst,
            "tolerance": tolerance, "reference": "transformers MtpModel (MTP tensors at layer "
            f"{first}, not 61)", "detail": f"MTP depth 0 vs transformers: max|Δlogit|/max|logit| {worst:.2e} "
            f"({'<=' if passed else '>'} {tolerance:.0e})"}  # fmt: skip


def _reference_logits(main: Any, reference_mtp: Any, ids: torch.Tensor) -> torch.Tensor:
    """transformers' first MTP layer over the whole prompt, as `generate(use_mtp=True)` runs it after prefill."""
    from transformers.cache_utils import DynamicCache

    hidden = main(ids, output_hidden_states=True).hidden_states[-1]
    positions = torch.arange(1, ids.shape[1])[None]
    cache = DynamicCache(config=main.config.get_mtp_config())
    out = reference_mtp.forward_layer(0, hidden[:, :-1], positions, cache, input_ids=ids[:, 1:])
    return reference_mtp._project_to_logits(out).float()
