"""Behavioural checks beyond parity: determinism, degeneration, stops, NaN/inf and fp16 overflow.

What a candidate cannot show (no batch, no padding, no activations, no logit_bias) is skipped with the reason, never
passed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from onboard.checks import Check, skipped
from onboard.comparator import Tolerances, compare_rows, first_difference, judge, known_dtype
from onboard.validate_serving.candidates import Candidate, LayerStat, TopK, run_concurrently
from onboard.validate_serving.golden import GoldenPrompt, GoldenSet
from onboard.validate_serving.parity import GreedyResult

REPEATS = 3
# Largest finite value per dtype: activations above it overflow to inf (BUGZOO B39).
DTYPE_MAX = {"float16": 65504.0, "bfloat16": 3.3895e38, "float32": 3.4028e38, "float64": 1.7977e308}
# Headroom below which a dtype is flagged (not failed): activations this close to the range overflow on other inputs.
HEADROOM_WARN = 4.0
# A suffix n-gram repeated this many times in a row is a loop (n = 1..MAX_PERIOD).
LOOP_REPEATS = {1: 6, 2: 4, 3: 3, 4: 3}
MAX_PERIOD = max(LOOP_REPEATS)


def _input(prompt: GoldenPrompt, candidate: Candidate) -> tuple[int, ...]:
    """What `_rows` runs for a prompt: the golden sequence when the candidate scores prompts, else the prompt."""
    return prompt.sequence if candidate.capabilities.prompt_logprobs else prompt.prompt_ids


def _rows_agree(
    candidate: Candidate, a: Sequence[TopK], b: Sequence[TopK], seq: Sequence[int], tol: Tolerances
) -> tuple[bool, str]:
    verdict = judge(compare_rows(a, b, seq[1:] if candidate.capabilities.prompt_logprobs else None), tol)
    detail = f"max logprob difference {verdict.max_logprob_error:.3g}, top-1 swaps {verdict.top1_mismatches}"
    return verdict.passed, detail if verdict.passed else "; ".join(verdict.reasons)


def _spread(a: Sequence[TopK], b: Sequence[TopK]) -> float:
    """Largest logprob difference between two runs of the same sequence (0.0 exactly when they are bitwise equal)."""
    return 0.0 if list(a) == list(b) else max((m.max_logprob_error for m in compare_rows(a, b)), default=0.0)


def _spread_text(spread: float, tol: float | None) -> str:
    if spread == 0.0:
        return "bitwise identical"
    within = f"; tolerance {tol:.3g}" if tol is not None else "; threshold 0 (bitwise)"
    return f"not bitwise: spread (max logprob difference) {spread:.3g}{within}"


def _rows(candidate: Candidate, batch: Sequence[Sequence[int]], top_k: int, new_tokens: int) -> list[list[TopK]]:
    """Teacher-forced rows when the candidate has prompt logprobs, else the rows of its greedy generation steps."""
    if candidate.capabilities.prompt_logprobs:
        return candidate.score(batch, top_k)
    return [list(g.steps) for g in candidate.generate(batch, new_tokens, top_k)]


def determinism_repeat(golden: GoldenSet, candidate: Candidate, top_k: int, tol: Tolerances) -> Check:
    """The same request repeated must give bitwise-identical logprobs and tokens: nothing differs between identical
    requests, so any difference is nondeterminism (racy reductions, atomics, a cache), not rounding."""
    prompts = sorted(golden.prompts, key=lambda p: len(p.sequence))[:2]
    problems, worst = [], 0.0
    for prompt in prompts:
        n = len(prompt.generated_ids)
        seq = _input(prompt, candidate)
        first = _rows(candidate, [seq], top_k, n)[0]
        gens = [candidate.generate([prompt.prompt_ids], n, top_k)[0] for _ in range(2)]
        spread = max(_spread(first, _rows(candidate, [seq], top_k, n)[0]) for _ in range(REPEATS - 1))
        spread = max(spread, _spread(gens[0].steps, gens[1].steps))
        worst = max(worst, spread)
        if spread > 0.0:
            problems.append(f"{prompt.name}: {_spread_text(spread, None)}")
        if gens[0].ids != gens[1].ids:
            problems.append(f"{prompt.name}: greedy tokens differ between identical requests")
    detail = "; ".join(problems) or f"{len(prompts)} prompts x {REPEATS} requests and 2 generations: bitwise identical"
    return Check(
        "determinism_repeat",
        not problems,
        True,
        detail,
        data={"max_difference": worst, "threshold": 0.0, "bitwise": worst == 0.0},
    )


def determinism_batch(golden: GoldenSet, candidate: Candidate, top_k: int, tol: Tolerances) -> Check:
    """A prompt alone vs in a batch with other prompts of the same length (B43: batch-size dependence at T=0)."""
    if not candidate.capabilities.batch:
        return skipped(
            "determinism_batch",
            "not checked: the candidate has no batch interface; a candidate that takes several prompts per call "
            "would check it",
        )
    prompts = sorted(golden.prompts, key=lambda p: len(p.sequence))
    target = prompts[0]
    n_new = len(target.generated_ids)
    # Companions cut to the target's length: the batch needs no padding (that is determinism_padding's job), so any
    # candidate that batches at all can run it.
    seq = _input(target, candidate)
    others = [_input(p, candidate)[: len(seq)] for p in prompts[1:4]] or [seq]
    batch = others[:1] + [seq] + others[1:]
    alone = _rows(candidate, [seq], top_k, n_new)[0]
    mixed = _rows(candidate, batch, top_k, n_new)[1]
    ok, detail = _rows_agree(candidate, alone, mixed, seq, tol)
    spread = _spread(alone, mixed)
    companions = [p.prompt_ids for p in prompts[1:2]] or [target.prompt_ids]
    gen_alone = candidate.generate([target.prompt_ids], n_new, top_k)[0].ids
    gen_mixed = candidate.generate(companions + [target.prompt_ids], n_new, top_k)[-1].ids
    if gen_alone != gen_mixed:
        ok, detail = False, detail + "; greedy tokens differ between batch 1 and batch N"
    detail = (
        f"{target.name} alone vs in a batch of {len(batch)}: {_spread_text(spread, tol.max_logprob_error)}; {detail}"
    )
    return Check("determinism_batch", ok, True, detail, data={"max_difference": spread, "bitwise": spread == 0.0})


def determinism_padding(golden: GoldenSet, candidate: Candidate, top_k: int, tol: Tolerances) -> Check:
    """A sequence alone vs inside batches with sequences of other lengths, arranged the ways the candidate batches:
    in process, left- and right-padded batches; an engine, one multi-prompt request and concurrent single requests.

    The spread (largest logprob difference from the sequence alone) is reported; passing allows the comparator's
    tolerance, because kernels that are not batch-invariant round differently with the batch's shape."""
    caps = candidate.capabilities
    if not caps.padding:
        return skipped(
            "determinism_padding",
            "not checked: this candidate takes no batches of different lengths; an engine endpoint or the generated "
            "adapter would check it",
        )
    by_length = {len(p.sequence): p for p in golden.prompts if p.kind != "long"}
    prompts = [by_length[n] for n in sorted(by_length)]
    if len(prompts) < 2:
        return skipped(
            "determinism_padding",
            "not checked: needs two prompts of different lengths; re-record the goldens with the default prompt suite",
        )
    target = prompts[0]
    seq = _input(target, candidate)
    n_new = len(target.generated_ids)
    others = [_input(p, candidate) for p in prompts[1:]]
    alone = _rows(candidate, [seq], top_k, n_new)[0]
    worst, problems, arrangements = 0.0, [], 0
    # Two compositions: the target with the longest companion, and with up to three of other lengths.
    for batch in ([others[-1], seq], [*others[:1], seq, *others[1:3]]):
        index = batch.index(seq)
        for label, rows in _arrangements(candidate, batch, top_k, n_new):
            arrangements += 1
            got = rows[index]
            ok, detail = _rows_agree(candidate, alone, got, seq, tol)
            worst = max(worst, _spread(alone, got))
            if not ok:
                problems.append(f"{label} of {len(batch)}: {detail}")
    summary = f"{target.name} alone vs in {arrangements} batches of other lengths"
    detail = "; ".join([f"{summary}: {_spread_text(worst, tol.max_logprob_error)}", *problems])
    data = {
        "max_difference": worst,
        "bitwise": worst == 0.0,
        "tolerance": tol.max_logprob_error,
        "arrangements": arrangements,
    }
    return Check("determinism_padding", not problems, True, detail, data=data)


def _arrangements(
    candidate: Candidate, batch: list[Sequence[int]], top_k: int, new_tokens: int
) -> list[tuple[str, list[list[TopK]]]]:
    """(label, rows per sequence) for each way `candidate` batches sequences of different lengths."""
    if not candidate.capabilities.concurrent:  # in process: one padded batch, padded on either side
        return [(f"{side}-padded batch", candidate.score(batch, top_k, padding=side)) for side in ("left", "right")]
    one = ("one request", _rows(candidate, batch, top_k, new_tokens))
    calls = [lambda s=s: _rows(candidate, [s], top_k, new_tokens)[0] for s in batch]
    return [one, ("concurrent requests", run_concurrently(calls))]


def loop_of(ids: Sequence[int]) -> tuple[int, int] | None:
    """(period, repeats) of an n-gram looping at the end of `ids`, or None."""
    for n in range(1, MAX_PERIOD + 1):
        unit, reps, end = tuple(ids[-n:]), 0, len(ids)
        while end - n >= 0 and tuple(ids[end - n : end]) == unit:
            reps, end = reps + 1, end - n
        if len(ids) >= n and reps >= LOOP_REPEATS[n]:
            return n, reps
    return None


def degeneration(greedy: list[GreedyResult]) -> Check:
    """A token or n-gram loop in the candidate's greedy output where the reference, on the same text, moves on (B25,
    B28 symptoms): a loop that has begun by the token where the candidate leaves the reference's continuation.

    A loop that begins after the candidate left the reference's text is on text the reference never continued (it
    may loop there too: docs/fidelity.md): listed, not failed."""
    bad, listed, loops = [], [], []
    for r in greedy:
        ids, reference = r.generation.ids, r.prompt.generated_ids
        got, ref = loop_of(ids), loop_of(reference)
        if not got or ref:
            continue
        start = len(ids) - got[0] * got[1]
        left = first_difference(ids, reference)
        attributable = left is None or start <= left
        loops.append(
            {
                "prompt": r.prompt.name,
                "period": got[0],
                "repeats": got[1],
                "start": start,
                "left_reference_at": left,
                "attributable": attributable,
            }
        )
        what = f"{r.prompt.name}: {got[0]}-gram repeated {got[1]}x at the end"
        if attributable:
            bad.append(f"{what} (reference does not loop)")
        else:
            listed.append(f"{what}, from generated token {start}, after leaving the reference's text at token {left}")
    clean = "no loop the reference lacks" if not listed else "no loop begun on the reference's text"
    detail = "; ".join(bad) or f"{len(greedy)} continuations: {clean}"
    if listed:
        detail += (
            "; not counted (the goldens do not say whether the reference loops on the candidate's own text): "
            + "; ".join(listed)
        )
    return Check("degeneration", not bad, True, detail, data={"loops": loops})


def stop_set(golden: GoldenSet, candidate: Candidate) -> Check:
    """The candidate stops on every token of the declared stop set the goldens recorded (B01: Llama 3 stops on two
    ids): each is forced as the first generated token, and generation must end there. An in-process candidate stops
    on what an engine loads from the files, so an end-of-turn token the files leave out fails here."""
    stops = [int(t) for t in golden.manifest.get("stop_token_ids", [])]
    if not stops:
        return skipped(
            "stop_set",
            "not checked: the goldens record no stop tokens (the checkpoint declares no EOS); declare eos_token_id in "
            "generation_config.json (onboard verify-tokenizer lists the stop set), re-record the goldens and "
            "validate again",
        )
    if not candidate.capabilities.force_token:
        return skipped(
            "stop_set",
            "not checked: the candidate cannot force a token (no logit_bias); an engine that accepts logit_bias "
            "(vLLM, SGLang) checks it",
        )
    prompt = min(golden.prompts, key=lambda p: len(p.prompt_ids)).prompt_ids
    failures = []
    for token in stops:
        gen = candidate.generate([prompt], 4, 1, ignore_eos=False, force_first=token)[0]
        if not gen.ids or gen.ids[0] != token:
            failures.append(f"{token}: could not be forced (got {list(gen.ids)[:4]})")
        elif len(gen.ids) > 1 or gen.finish_reason == "length":
            failures.append(f"{token}: generation continued ({len(gen.ids)} tokens, finish_reason {gen.finish_reason})")
    detail = "; ".join(failures) or f"stops on every token of the declared stop set {stops}"
    honoured = list(getattr(candidate, "stop_ids", ()) or ())
    missing = [t for t in stops if honoured and t not in honoured]
    if failures and missing:
        detail += (
            f"; the candidate stops on {honoured} (generation_config.json eos_token_id and the tokenizer's "
            f"EOS): add {missing} to generation_config.json eos_token_id"
        )
    return Check("stop_set", not failures, True, detail, data={"stop_token_ids": stops, "honoured": honoured})


def nan_inf_scan(parity_rows: Sequence[Sequence[TopK]], activations: list[LayerStat] | None) -> Check:
    """No NaN/inf in any returned logprob, nor (when observable) in any module's activations."""
    bad_rows = sum(1 for rows in parity_rows for r in rows if not all(math.isfinite(v) for v in r.logprobs))
    bad_layers = [s.name for s in activations or [] if s.nonfinite]
    problems = []
    if bad_rows:
        problems.append(f"{bad_rows} positions with NaN/inf logprobs")
    if bad_layers:
        problems.append(f"non-finite activations first in {bad_layers[0]} ({len(bad_layers)} modules)")
    scope = (
        "logprobs and per-module activations"
        if activations is not None
        else "logprobs only (activations not observable)"
    )
    return Check("nan_inf_scan", not problems, True, "; ".join(problems) or f"all finite ({scope})")


def fp16_overflow(golden: GoldenSet, dtype: str, activations: list[LayerStat] | None) -> Check:
    """Per-layer activation max-abs (float32 reference, and the candidate's own when observable) vs the dtype range.
    A dtype without a range in DTYPE_MAX raises UnknownDtype (another dtype's range would pass or fail by chance)."""
    limit = DTYPE_MAX[known_dtype(dtype, DTYPE_MAX, "largest finite value in validate's DTYPE_MAX")]
    reference = {k: float(v) for k, v in golden.manifest.get("activation_max_abs", {}).items()}
    if not reference and activations is None:
        return skipped(
            "fp16_overflow",
            "not checked: no activation statistics (goldens without activation_max_abs, a candidate without hooks); "
            "goldens recorded by onboard golden record carry them",
        )
    over = sorted((v, k) for k, v in reference.items() if v > limit)
    cand_over = [s for s in activations or [] if s.nonfinite or s.max_abs > limit]
    peak_name, peak = max(reference.items(), key=lambda kv: kv[1], default=("-", 0.0))
    headroom = limit / peak if peak else math.inf
    problems = []
    if over:
        problems.append(
            f"reference activations exceed the {dtype} range ({limit:g}) in {len(over)} modules, worst {over[-1][1]} = {over[-1][0]:.4g}"
        )
    if cand_over:
        problems.append(f"candidate overflows {dtype} in {len(cand_over)} modules, first {cand_over[0].name}")
    detail = (
        "; ".join(problems)
        or f"peak reference activation {peak:.4g} in {peak_name}: headroom x{headroom:.3g} in {dtype}"
    )
    if not problems and headroom < HEADROOM_WARN:
        detail += f" (warning: below x{HEADROOM_WARN:g}; other inputs may overflow)"
    return Check(
        "fp16_overflow", not problems, True, detail, data={"headroom": headroom if math.isfinite(headroom) else None}
    )
