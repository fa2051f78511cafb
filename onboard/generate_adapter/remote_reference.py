"""The repository's own code as parity's reference: `reference_logits` runs in the sandbox worker (the one place
`trust_remote_code=True` is passed); `SandboxedReference` stands in for the model with the logits it sent back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from onboard import reference
from onboard.errors import InputError
from onboard.reference import RemoteCodePolicy, remote_code_allowed

WORKER = "onboard.generate_adapter.remote_reference:reference_logits"


def reference_logits(checkpoint: str, prompts: list[list[int]], dtype: str) -> dict[str, Any]:
    """Worker side: the repo's model (eager attention, eager experts) on each prompt; {"logits": [tensor, ...]}."""
    import torch

    from onboard.reference import load_transformers

    with remote_code_allowed():
        model = load_transformers(Path(checkpoint), dtype)
    with torch.no_grad():
        logits = [model(input_ids=torch.tensor([ids])).logits.float() for ids in prompts]
    return {"logits": logits}


class SandboxedReference:
    """Parity's reference model when the reference is repository code: precomputed logits per prompt."""

    def __init__(self, checkpoint: Path, dtype: str, policy: RemoteCodePolicy, inputs: list[Any]) -> None:
        prompts = [ids[0].tolist() for ids in inputs]
        result = reference.run_in_sandbox(
            WORKER, {"checkpoint": str(checkpoint), "prompts": prompts, "dtype": dtype}, checkpoint, policy
        )
        self._logits = {tuple(p): t for p, t in zip(prompts, result["logits"], strict=True)}

    def __call__(self, input_ids: Any = None, **_: Any) -> Any:
        key = tuple(input_ids[0].tolist())
        if key not in self._logits:
            raise InputError(
                "the sandboxed reference was asked for a prompt it did not run",
                "this is a bug in onboard's parity harness",
            )
        return self._logits[key]

    def eval(self) -> SandboxedReference:
        return self
