"""The Candidate interface: what is validated against the goldens.

In process (runtime.py): the generated adapter, or transformers as a labelled self-check of the harness; or any
OpenAI-compatible endpoint (endpoint.py). Each answers `score` (teacher-forced distributions) and `generate` (greedy
continuation with per-step top-k); what it cannot do is declared in `Capabilities`, so the report says "not checked"
instead of passing silently.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from onboard.comparator import TopK

DTYPES = ("float32", "bfloat16", "float16", "float64")
T = TypeVar("T")


@dataclass(frozen=True)
class Generation:
    ids: tuple[int, ...]
    steps: tuple[TopK, ...]
    """One per generated token: the distribution it was chosen from."""
    finish_reason: str | None = None
    """"stop", "length", or None when the engine does not say."""
    times: tuple[float, ...] = ()
    """Seconds from sending the request to each token's arrival, for the performance figures."""


@dataclass(frozen=True)
class LayerStat:
    name: str
    max_abs: float
    nonfinite: int


@dataclass(frozen=True)
class Capabilities:
    prompt_logprobs: bool = True
    """Teacher-forced distributions at prompt positions (vLLM prompt_logprobs, OpenAI echo+logprobs, in-process)."""
    batch: bool = True
    padding: bool = True
    """A sequence can be scored in a batch of sequences of other lengths (padded, or several prompts per request)."""
    concurrent: bool = False
    """Requests may be sent concurrently from threads (an engine's scheduler batches them as it batches traffic)."""
    activations: bool = False
    """Per-layer activation statistics (hooks)."""
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
    """What validate calls; an implementation may subclass it for the defaults (nothing to scan, nothing to close)."""

    info: CandidateInfo
    capabilities: Capabilities
    stop_ids: tuple[int, ...] = ()
    """The stop set the candidate honours (from what it loaded), empty when unknown."""

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
        return None

    def close(self) -> None:
        return None


def run_concurrently(calls: Sequence[Callable[[], T]]) -> list[T]:
    """Start every call at once (one thread each, released together) and return their results in order; the first
    exception is re-raised in the caller's thread."""
    results: list[Any] = [None] * len(calls)
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(calls)) if calls else None

    def run(i: int) -> None:
        try:
            barrier.wait()  # type: ignore[union-attr]
            results[i] = calls[i]()
        except BaseException as exc:  # re-raised below in the caller's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results
