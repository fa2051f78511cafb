"""Performance, measured separately from correctness, with the definitions written once (vLLM `bench serve`).

  TTFT            request sent -> first output token received (streamed) or decoded (in-process).
  prefill latency TTFT of a request with max_tokens=1, per prompt length (median of PREFILL_REPEATS).
  E2EL            request sent -> last output token.
  TPOT            (E2EL - TTFT) / (output_tokens - 1); 0 when one token.
  ITL             every gap between consecutive token arrivals, reported as p50 / p99. Streamed: arrival =
                  when the client parsed the event; tokens of one chunk, or events the engine flushed together,
                  arrive together (gap ~0), as in vLLM bench, so p50 can be ~0 while p99 shows the real step.
  throughput      output tokens / seconds: batch 1 = one request's tokens / its E2EL; batch N = all tokens of
                  N concurrent requests / wall time from the first send to the last token.
  peak memory     in-process: CUDA max allocated, else the process's peak RSS (ru_maxrss, includes Python);
                  endpoints: not observable through the OpenAI API (null).
Every figure is reported with hardware, dtype and library versions: numbers from different stacks do not compare.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from onboard.validate_serving.candidates import Candidate
from onboard.validate_serving.golden import GoldenSet

PREFILL_LENGTHS = (16, 64, 256, 1024, 4096)
PREFILL_REPEATS = 3
DECODE_TOKENS = 32
BATCH_N = 4


@dataclass(frozen=True)
class Performance:
    prefill_by_length: list[dict[str, float]]
    ttft_ms: float
    tpot_ms: float
    itl_p50_ms: float
    itl_p99_ms: float
    e2el_ms: float
    throughput_tok_s_b1: float
    throughput_tok_s_bN: float | None
    batch_n: int
    peak_memory_bytes: int | None
    peak_memory_kind: str
    decode_tokens: int
    hardware: dict[str, object]
    dtype: str
    versions: dict[str, str]
    notes: list[str] = field(default_factory=list)


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default), q in [0, 100]."""
    if not values:
        return 0.0
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def tpot(times: tuple[float, ...]) -> float:
    return (times[-1] - times[0]) / (len(times) - 1) if len(times) > 1 else 0.0


def measure(golden: GoldenSet, candidate: Candidate, max_length: int | None = None) -> Performance:
    """Prefill by length, decode latency at batch 1, throughput at batch 1 and N, peak memory."""
    pool = [t for p in golden.prompts for t in p.sequence]
    longest = max(len(p.sequence) for p in golden.prompts)
    cap = min(max_length or longest, longest)
    lengths = sorted({n for n in PREFILL_LENGTHS if n <= cap} | {cap})

    def prompt_of(n: int, offset: int = 0) -> list[int]:
        return [pool[(offset + i) % len(pool)] for i in range(n)]

    prefill = []
    for n in lengths:
        samples = [candidate.generate([prompt_of(n)], 1, 1)[0].times[0] for _ in range(PREFILL_REPEATS)]
        prefill.append({"tokens": n, "ms": round(1000 * statistics.median(samples), 3)})
    candidate.generate([prompt_of(16)], 2, 1)  # warm-up: first decode steps allocate caches
    gen = candidate.generate([prompt_of(16)], DECODE_TOKENS, 1)[0]
    times = gen.times
    gaps = [b - a for a, b in zip(times, times[1:])]
    notes = []
    batch_tps = None
    timed = getattr(candidate, "timed_batch", None)
    if timed is not None:
        tokens, seconds = timed([prompt_of(16, 7 * i) for i in range(BATCH_N)], DECODE_TOKENS)
        batch_tps = tokens / seconds if seconds > 0 else None
    else:
        notes.append("batch-N throughput not measurable for this candidate")
    mem, kind = candidate.peak_memory() if hasattr(candidate, "peak_memory") else (None, "not observable")
    info = candidate.info
    return Performance(
        prefill_by_length=prefill,
        ttft_ms=round(1000 * times[0], 3),
        tpot_ms=round(1000 * tpot(times), 3),
        itl_p50_ms=round(1000 * percentile(gaps, 50), 3),
        itl_p99_ms=round(1000 * percentile(gaps, 99), 3),
        e2el_ms=round(1000 * times[-1], 3),
        throughput_tok_s_b1=round(len(times) / times[-1], 2) if times[-1] > 0 else 0.0,
        throughput_tok_s_bN=round(batch_tps, 2) if batch_tps else None,
        batch_n=BATCH_N,
        peak_memory_bytes=mem,
        peak_memory_kind=kind,
        decode_tokens=len(times),
        hardware=info.hardware,
        dtype=info.dtype,
        versions=info.versions,
        notes=notes + list(candidate.capabilities.notes),
    )
