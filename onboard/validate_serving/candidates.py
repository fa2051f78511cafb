"""The Candidate interface: what is being validated against the goldens.

Two kinds:
  (a) in-process: our generated adapter runtime (`onboard.generate_adapter`, `Model.from_pretrained(path, dtype)`,
      `model(input_ids) -> logits`). TODO(generate-adapter): that runtime is being written in parallel; until it is
      importable, `load_candidate` falls back to transformers itself in a clearly marked "reference-as-candidate"
      mode (kind="reference-as-candidate") so the pipeline and the checks can be developed and tested end to end.
  (b) any OpenAI-compatible endpoint (`onboard.validate_serving.endpoint.EndpointCandidate`).

Every candidate answers two questions: `score` (teacher-forced distributions at every position of given sequences)
and `generate` (greedy continuation with per-step top-k). What a candidate cannot do is declared in `Capabilities`
so the report can say "not checked" instead of passing it silently.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

DTYPES = ("float32", "bfloat16", "float16", "float64")


@dataclass(frozen=True)
class TopK:
    """One position: the top-k next-token distribution, best first, and the logprob of the token that followed."""

    ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    token_logprob: float | None = None


@dataclass(frozen=True)
class Generation:
    ids: tuple[int, ...]
    steps: tuple[TopK, ...]
    """One per generated token: the distribution it was chosen from."""
    finish_reason: str | None = None
    """"stop" (a stop token ended it), "length", or None when the engine does not say."""
    times: tuple[float, ...] = ()
    """Seconds from sending the request to each token's arrival (streamed or decoded), for performance figures."""


@dataclass(frozen=True)
class LayerStat:
    name: str
    max_abs: float
    nonfinite: int


@dataclass(frozen=True)
class Capabilities:
    prompt_logprobs: bool = True
    """Teacher-forced distributions at prompt positions (vLLM prompt_logprobs, OpenAI echo+logprobs, in-process)."""
    generation_logprobs: bool = True
    batch: bool = True
    padding: bool = True
    """Left/right padding with an attention mask is observable (in-process only: engines pad internally)."""
    activations: bool = False
    """Per-layer activation statistics (hooks) are available."""
    force_token: bool = True
    """A token can be forced (logit_bias) to test stops."""
    ignore_eos: bool = True
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class CandidateInfo:
    name: str
    kind: str
    """adapter | reference-as-candidate | endpoint"""
    dtype: str
    versions: dict[str, str] = field(default_factory=dict)
    hardware: dict[str, object] = field(default_factory=dict)


class Candidate(Protocol):
    info: CandidateInfo
    capabilities: Capabilities
    stop_ids: tuple[int, ...]
    """The stop set the candidate itself will honour (from what it loaded), empty when unknown."""

    def score(self, sequences: Sequence[Sequence[int]], top_k: int, padding: str = "right") -> list[list[TopK]]:
        """Per sequence, distributions at positions 0..len-2 (each predicting the next token of the sequence)."""
        ...

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        max_new_tokens: int,
        top_k: int,
        *,
        ignore_eos: bool = True,
        force_first: int | None = None,
    ) -> list[Generation]:
        """Greedy continuations. `force_first` forces the first token (stop tests); `ignore_eos` runs to length."""
        ...

    def scan_activations(self, sequence: Sequence[int]) -> list[LayerStat] | None:
        """Per-module max-abs and non-finite counts over one forward, or None when not observable."""
        ...

    def close(self) -> None: ...


def load_candidate(path: Path, dtype: str, *, device: str = "cpu", wrap: object | None = None) -> Candidate:
    """The in-process candidate for a checkpoint folder: the adapter runtime, else reference-as-candidate.

    `wrap` (tests and seeded defects): a callable taking the loaded torch module and returning a module.
    """
    from onboard.validate_serving.runtime import InProcessCandidate, load_transformers

    if dtype not in DTYPES:
        from onboard.errors import InputError

        raise InputError(f"unknown --dtype {dtype!r}", f"use one of {', '.join(DTYPES)}")
    adapter = _adapter_model(path, dtype)
    if adapter is not None:
        # The adapter runtime exposes `model(input_ids) -> logits`: no attention mask, no cache.
        model = wrap(adapter) if wrap else adapter
        return InProcessCandidate(model, path, dtype, kind="adapter", hf=False)
    model = load_transformers(path, dtype, device=device)
    model = wrap(model) if wrap else model
    return InProcessCandidate(model, path, dtype, kind="reference-as-candidate", hf=True)


def _adapter_model(path: Path, dtype: str) -> object | None:
    """The generated adapter for `path` when onboard.generate_adapter is available; None until it lands."""
    try:
        from onboard import generate_adapter  # type: ignore[attr-defined]
    except ImportError:
        return None
    loader = getattr(generate_adapter, "load_model", None)
    # TODO(generate-adapter): settle the entry point with the adapter's author; we accept either a module-level
    # `load_model(path, dtype)` or a `Model.from_pretrained(path, dtype)` class.
    if loader is not None:
        return loader(path, dtype)
    model_cls = getattr(generate_adapter, "Model", None)
    if model_cls is not None:
        return model_cls.from_pretrained(path, dtype)
    return None
