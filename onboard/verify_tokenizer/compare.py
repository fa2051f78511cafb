"""Fast tokenizer vs references, round trip and streamed decode: exact comparisons with a precise first diff."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from onboard.comparator import first_difference
from onboard.verify_tokenizer.references import Reference
from onboard.verify_tokenizer.subject import Subject

STREAM_TOKENS = 10_000
"""Streamed decode costs two decodes per token: checked on the first strings up to this many tokens."""


@dataclass(frozen=True)
class Divergence:
    text: str
    position: int
    """Index of the first differing token."""
    subject_ids: list[int]
    reference_ids: list[int]
    subject_pieces: list[str]
    reference_pieces: list[str]
    """Each id decoded on its own."""
    subject_tokens: list[str]
    reference_tokens: list[str]
    """Raw vocabulary strings (`▁world` vs `world`: what decoding single ids hides)."""


@dataclass(frozen=True)
class Comparison:
    reference: str
    kind: str
    file: str
    independent: bool
    note: str
    strings: int
    mismatches: int
    seconds: float
    """Time the reference took to encode the corpus."""
    first: Divergence | None = None
    error: str | None = None


@dataclass(frozen=True)
class RoundTrip:
    strings: int
    lossy: int
    first_lossy: tuple[str, str] | None
    """(input, decode(encode(input)))"""
    streamed: int
    stream_mismatches: int
    first_stream_mismatch: tuple[str, str] | None
    """(full decode, streamed decode)"""


def compare(subject: Subject, texts: Sequence[str], subject_ids: list[list[int]], ref: Reference) -> Comparison:
    """Encode `texts` with `ref` and compare with the subject's ids (already computed, add_special_tokens=False)."""
    start = time.perf_counter()
    mismatches = 0
    first: Divergence | None = None
    failure = None
    for text, ids in zip(texts, subject_ids):
        try:
            ref_ids = ref.encode(text)
        except Exception as exc:  # a reference that cannot encode a string is a finding, not a crash
            failure = f"{type(exc).__name__}: {exc} on {text[:60]!r}"
            break
        if ref_ids != ids:
            mismatches += 1
            first = first or divergence(subject, text, ids, ref_ids)
    seconds = time.perf_counter() - start
    return Comparison(
        ref.name, ref.kind, ref.file, ref.independent, ref.note, len(texts), mismatches, seconds, first, failure
    )


def divergence(subject: Subject, text: str, ids: list[int], ref_ids: list[int]) -> Divergence:
    size = len(subject)

    def pieces(seq: list[int]) -> list[str]:
        return [subject.decode([i]) if 0 <= i < size else f"<id {i}>" for i in seq]

    def tokens(seq: list[int]) -> list[str]:
        return [str(subject.hf.convert_ids_to_tokens(i)) if 0 <= i < size else f"<id {i}>" for i in seq]

    at = first_difference(ids, ref_ids) or 0  # only called for ids that differ: never None
    return Divergence(text, at, ids, ref_ids, pieces(ids), pieces(ref_ids), tokens(ids), tokens(ref_ids))


def round_trip(subject: Subject, texts: Sequence[str], subject_ids: list[list[int]]) -> RoundTrip:
    """decode(encode(x)) == x where the tokenizer is lossless (strings that hit the unk token are skipped)."""
    unk = getattr(subject.hf, "unk_token_id", None)
    decoded = subject.decode_batch(subject_ids)
    lossy, first_lossy, checked = 0, None, 0
    for text, ids, out in zip(texts, subject_ids, decoded):
        if unk is not None and unk in ids:
            continue
        checked += 1
        if out != text:
            lossy += 1
            first_lossy = first_lossy or (text, out)
    streamed, bad, first_bad, budget = 0, 0, None, STREAM_TOKENS
    for ids, full in zip(subject_ids, decoded):
        budget -= len(ids)
        if budget < 0 and streamed:
            break
        streamed += 1
        got = stream_decode(subject, ids)
        if got != full:
            bad += 1
            first_bad = first_bad or (full, got)
    return RoundTrip(checked, lossy, first_lossy, streamed, bad, first_bad)


def stream_decode(subject: Subject, ids: list[int]) -> str:
    """Detokenize one id at a time the way serving engines do (prefix/read offsets, hold back partial UTF-8)."""
    out: list[str] = []
    prefix_offset = read_offset = 0
    for i in range(len(ids)):
        prefix_text = subject.decode(ids[prefix_offset:read_offset])
        new_text = subject.decode(ids[prefix_offset : i + 1])
        if len(new_text) > len(prefix_text) and not new_text.endswith("\ufffd"):
            out.append(new_text[len(prefix_text) :])
            prefix_offset, read_offset = read_offset, i + 1
    # Flush what was held back (an incomplete character at the very end).
    tail_prefix = subject.decode(ids[prefix_offset:read_offset])
    tail = subject.decode(ids[prefix_offset:])
    if len(tail) > len(tail_prefix):
        out.append(tail[len(tail_prefix) :])
    return "".join(out)
