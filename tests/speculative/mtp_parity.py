"""Parity of the MTP draft (onboard/speculative/mtp.py) against transformers' `MtpModel`, where transformers
implements the family.

transformers finds the MTP tensors through `_keys_to_ignore_on_load_unexpected`, which DeepSeek-V3 hard-codes to
layer 61 (the full-size model's); here it is pointed at this checkpoint's MTP indices, so a smaller DeepSeek-V3-shaped
checkpoint is checked too. Elsewhere the result is "unverified" and says what would verify it. The verdict is the
comparator's `agreement`, as adapter parity judges: the first MTP depth, teacher-forced over the parity prompts in
float32, against transformers' float32 run and judged against its own float64 run. Row t of the draft is its
distribution for token t+2. Reported besides: max|Δlogit| / max|reference logit| (`worst`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from onboard.comparator import CALIBRATION, Agreement, agreement, topk_rows
from onboard.generate_adapter.parity import (
    CALIBRATED_BAR,
    DTYPES,
    MOE_KEYS,
    PARITY_TOP_K,
    parity_config,
    prompts,
    reference_model,
    unverified,
)
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
    # transformers' own MtpModel over `main`'s folder: no repository code (stated anyway, as at every load site).
    reference_mtp = MtpModel.from_pretrained(main, trust_remote_code=False).eval()
    config = parity_config(path)
    inputs = prompts(config)
    with torch.no_grad():
        refs = [_reference_logits(main, reference_mtp, ids) for ids in inputs]
        ours = [mtp_draft_logits(draft, target_hidden(target, ids)[1], ids) for ids in inputs]
        # transformers' own run in float32's calibration dtype, the noise the verdict is judged against (cast in
        # place: no third copy of the model in memory).
        calibration = DTYPES[CALIBRATION["float32"]]
        main.to(calibration)
        reference_mtp.to(calibration)
        own = [_reference_logits(main, reference_mtp, ids) for ids in inputs]
    verdict = mtp_agreement(refs, ours, own, inputs, moe=any(config.get(k) for k in MOE_KEYS))
    worst = max(float((o - r).abs().max()) / max(float(r.abs().max()), 1e-30) for o, r in zip(ours, refs))
    passed = verdict.passed
    return {
        "passed": passed,
        "status": "passed" if passed else "failed",
        "dtype": "float32",
        "worst": worst,
        "tolerance": CALIBRATED_BAR,
        "reference": f"transformers MtpModel (MTP tensors at layer {first}, not 61)",
        "detail": f"MTP depth 0 in float32 vs transformers float32, judged "
        f"against transformers in {CALIBRATION['float32']}: {verdict.detail()}; max|Δ|/max|logit| {worst:.2e}",
    }


def mtp_agreement(
    refs: list[torch.Tensor],
    ours: list[torch.Tensor],
    own: list[torch.Tensor],
    inputs: list[torch.Tensor],
    *,
    moe: bool,
) -> Agreement:
    """The comparator's verdict on first-depth MTP logits ([1, S-1, V] per prompt, row t for token t+2): the draft's
    (`ours`) vs transformers' float32 (`refs`), against transformers' own float64 run (`own`). The last row of each
    prompt predicts a token past its end and is left out."""
    nexts = [ids[0, 2:].tolist() for ids in inputs]

    def rows(logits: list[torch.Tensor], k: int) -> list[list[Any]]:
        return [topk_rows(x[0, :-1], k, n) for x, n in zip(logits, nexts)]

    return agreement(
        "float32", rows(refs, PARITY_TOP_K), rows(ours, 2 * PARITY_TOP_K), [rows(own, 2 * PARITY_TOP_K)], nexts, moe=moe
    )


def _reference_logits(main: Any, reference_mtp: Any, ids: torch.Tensor) -> torch.Tensor:
    """transformers' first MTP layer over the whole prompt, as `generate(use_mtp=True)` runs it after prefill."""
    from transformers.cache_utils import DynamicCache

    hidden = main(ids, output_hidden_states=True).hidden_states[-1]
    positions = torch.arange(1, ids.shape[1])[None]
    cache = DynamicCache(config=main.config.get_mtp_config())
    out = reference_mtp.forward_layer(0, hidden[:, :-1], positions, cache, input_ids=ids[:, 1:])
    return reference_mtp._project_to_logits(out).float()
