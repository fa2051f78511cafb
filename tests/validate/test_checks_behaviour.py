"""validate's behavioural checks (determinism, degeneration, stops, NaN/inf, fp16 overflow) on a scripted candidate:
which check fails, what it reports, and which capability gaps are skipped (never passed).

The candidate is pure Python (no model): its rows are a fixed function of the sequence, and each defect is one knob
(drift between identical requests, batch-size or padding dependence, tokens that do not stop), so each test names
the defect a user relies on the check to catch, at a size just above or below the dtype's tolerance.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from onboard.comparator import TopK, first_difference, tolerances
from onboard.errors import UnknownDtype
from onboard.validate_serving import checks
from onboard.validate_serving.candidates import Capabilities, Generation, LayerStat
from onboard.validate_serving.golden import GoldenPrompt, GoldenSet
from onboard.validate_serving.parity import GreedyResult

VOCAB = 50
TOL = tolerances("bfloat16", None)  # max_logprob_error 0.08
SMALL = 0.001  # below the bf16 tolerance: not bitwise, still a pass where a tolerance applies
LARGE = 1.5  # far above it


def _row(prefix: Sequence[int]) -> TopK:
    top = (sum(prefix) * 7 + len(prefix)) % VOCAB
    return TopK((top, (top + 1) % VOCAB, (top + 2) % VOCAB), (-0.05, -3.2, -4.1))


def _bumped(row: TopK, delta: float) -> TopK:
    return TopK(row.ids, (row.logprobs[0] - delta, *row.logprobs[1:])) if delta else row


@dataclass
class Scripted:
    """A candidate whose defects are set by its fields."""

    capabilities: Capabilities = field(default_factory=Capabilities)
    drift: float = 0.0  # every request after the first differs by this much
    batch_shift: float = 0.0  # rows differ by this much in a batch of more than one
    left_pad_shift: float = 0.0  # rows of a shorter sequence differ in a left-padded batch
    batch_tokens_differ: bool = False  # greedy tokens change in a batch of more than one
    tokens_differ: bool = False  # greedy tokens change between identical requests
    stop_ids: tuple[int, ...] = ()
    honours: tuple[int, ...] = ()  # forced tokens it stops on
    unforceable: tuple[int, ...] = ()
    calls: int = 0
    scored: int = 0  # score requests (sequences scored)

    def score(self, sequences: Sequence[Sequence[int]], top_k: int, padding: str = "right") -> list[list[TopK]]:
        _expect_count(top_k, "top_k")  # an engine rejects a request without them, as this one does
        self.calls += 1
        self.scored += len(sequences)
        delta = self.drift * (self.calls - 1)
        width = max(len(s) for s in sequences)
        out = []
        for seq in sequences:
            shift = delta + (self.batch_shift if len(sequences) > 1 else 0.0)
            if padding == "left" and len(seq) < width:
                shift += self.left_pad_shift
            out.append([_bumped(_row(seq[: i + 1]), shift) for i in range(len(seq) - 1)])
        return out

    def generate(self, prompts, max_new_tokens, top_k, *, ignore_eos=True, force_first=None) -> list[Generation]:
        _expect_count(top_k, "top_k")
        _expect_count(max_new_tokens, "max_new_tokens")
        self.calls += 1
        results = []
        for prompt in prompts:
            ids: list[int] = []
            steps: list[TopK] = []
            for step in range(max_new_tokens):
                row = _row(list(prompt) + ids)
                token = row.ids[0]
                if step == 0 and force_first is not None:
                    if force_first in self.unforceable:
                        break
                    token = force_first
                if self.tokens_differ and self.calls % 2 == 0 or self.batch_tokens_differ and len(prompts) > 1:
                    token = (token + 1) % VOCAB
                ids.append(token)
                steps.append(_bumped(row, self.batch_shift if len(prompts) > 1 else 0.0))
                if not ignore_eos and token in self.honours:
                    break
            reason = "stop" if ids and ids[-1] in self.honours and not ignore_eos else "length"
            results.append(Generation(tuple(ids), tuple(steps), reason))
        return results


def _expect_count(value: object, name: str) -> None:
    if not isinstance(value, int) or value < 1:
        raise TypeError(f"{name} must be a positive int, got {value!r}")


def _prompt(name: str, prompt_ids: Sequence[int], n_new: int = 4, kind: str = "short") -> GoldenPrompt:
    ids: list[int] = []
    for _ in range(n_new):
        ids.append(_row(list(prompt_ids) + ids).ids[0])
    seq = tuple(prompt_ids) + tuple(ids)
    rows = tuple(_row(seq[: i + 1]) for i in range(len(seq) - 1))
    return GoldenPrompt(name, kind, None, tuple(prompt_ids), tuple(ids), rows)


def _golden(*lengths: int, manifest: dict | None = None) -> GoldenSet:
    prompts = tuple(_prompt(f"p{n}", [(3 * i + n) % VOCAB for i in range(n)]) for n in lengths)
    return GoldenSet(Path("."), {"stop_token_ids": [], **(manifest or {})}, prompts)


# determinism_repeat: threshold 0, no tolerance


def test_repeat_identical_requests_pass_bitwise():
    result = checks.determinism_repeat(_golden(3, 5, 9), Scripted(), 3, TOL)
    assert (result.name, result.passed, result.required) == ("determinism_repeat", True, True)
    assert result.data == {"max_difference": 0.0, "threshold": 0.0, "bitwise": True}
    assert result.detail.startswith("2 prompts x 3 requests")


def test_repeat_drift_below_every_tolerance_still_fails():
    result = checks.determinism_repeat(_golden(3, 5), Scripted(drift=1e-6), 3, TOL)
    assert not result.passed
    assert result.data["bitwise"] is False
    assert 0.0 < result.data["max_difference"] < TOL.max_logprob_error / 1000
    assert "p3: not bitwise: spread (max logprob difference)" in result.detail and "p5: not bitwise" in result.detail
    assert "threshold 0 (bitwise)" in result.detail  # no tolerance offered between identical requests
    assert "; p5: not bitwise" in result.detail


def test_repeat_sends_each_request_three_times():
    cand = Scripted()
    checks.determinism_repeat(_golden(3, 5, 9), cand, 3, TOL)
    assert cand.scored == 2 * checks.REPEATS


def test_repeat_greedy_tokens_that_change_between_requests_fail():
    result = checks.determinism_repeat(_golden(3, 5), Scripted(tokens_differ=True), 3, TOL)
    assert not result.passed
    assert "p3: greedy tokens differ between identical requests" in result.detail


# determinism_batch


def test_batch_skipped_without_a_batch_interface():
    result = checks.determinism_batch(_golden(3, 5), Scripted(capabilities=Capabilities(batch=False)), 3, TOL)
    assert (result.passed, result.required, result.skipped) == (False, False, True)
    assert "not checked" in result.detail


@pytest.mark.parametrize("logprobs", [True, False])
def test_batch_invariant_candidate_passes_bitwise(logprobs):
    cand = Scripted(capabilities=Capabilities(prompt_logprobs=logprobs))
    result = checks.determinism_batch(_golden(4, 6, 8, 9, 10, 11), cand, 3, TOL)
    assert result.passed and result.required
    assert result.data == {"max_difference": 0.0, "bitwise": True}
    assert "p4 alone vs in a batch of 4: bitwise identical" in result.detail  # three companions at most


def test_batch_difference_within_tolerance_passes_but_is_not_bitwise():
    result = checks.determinism_batch(_golden(4, 6), Scripted(batch_shift=SMALL), 3, TOL)
    assert result.passed
    assert result.data["bitwise"] is False
    assert result.data["max_difference"] == pytest.approx(SMALL)
    assert "not bitwise" in result.detail and "tolerance 0.08" in result.detail
    assert "max logprob difference 0.001, top-1 swaps 0" in result.detail  # what the comparator measured


def test_batch_size_dependence_beyond_tolerance_fails():
    result = checks.determinism_batch(_golden(4, 6), Scripted(batch_shift=LARGE), 3, TOL)
    assert not result.passed
    assert result.data["max_difference"] == pytest.approx(LARGE)


def test_batch_greedy_tokens_that_change_with_the_batch_fail():
    result = checks.determinism_batch(_golden(4, 6), Scripted(batch_tokens_differ=True), 3, TOL)
    assert not result.passed
    assert "greedy tokens differ between batch 1 and batch N" in result.detail


def test_batch_of_a_single_prompt_batches_it_with_itself():
    result = checks.determinism_batch(_golden(5), Scripted(batch_shift=LARGE), 3, TOL)
    assert not result.passed  # a batch of two copies still shows the batch-size dependence
    assert "batch of 2" in result.detail


# determinism_padding


def test_padding_skipped_without_padding_or_without_two_lengths():
    no_padding = checks.determinism_padding(_golden(3, 5), Scripted(capabilities=Capabilities(padding=False)), 3, TOL)
    one_length = checks.determinism_padding(_golden(5, 5), Scripted(), 3, TOL)
    for result in (no_padding, one_length):
        assert (result.passed, result.required, result.skipped) == (False, False, True)
    assert "two prompts of different lengths" in one_length.detail


def test_padding_in_process_checks_left_and_right_padded_batches():
    result = checks.determinism_padding(_golden(3, 5, 7, 9), Scripted(), 3, TOL)
    assert result.passed
    assert result.data == {"max_difference": 0.0, "bitwise": True, "tolerance": 0.08, "arrangements": 4}
    assert result.detail == "p3 alone vs in 4 batches of other lengths: bitwise identical"


def test_padding_left_padding_bug_fails_and_names_the_arrangement():
    result = checks.determinism_padding(_golden(3, 5, 7), Scripted(left_pad_shift=LARGE), 3, TOL)
    assert not result.passed
    assert "left-padded batch of 2" in result.detail and "left-padded batch of 3" in result.detail
    assert "right-padded" not in result.detail
    assert result.data["max_difference"] == pytest.approx(LARGE)


def test_padding_long_prompts_are_left_out():
    golden = _golden(3, 5)
    long = _prompt("long", list(range(12)), kind="long")
    golden = GoldenSet(golden.folder, golden.manifest, (*golden.prompts, long))
    result = checks.determinism_padding(golden, Scripted(left_pad_shift=LARGE), 3, TOL)
    assert "of 2" in result.detail and "of 3" not in result.detail


def test_padding_on_an_engine_uses_one_request_and_concurrent_requests():
    engine = Capabilities(concurrent=True, prompt_logprobs=False)
    result = checks.determinism_padding(_golden(3, 5, 7), Scripted(capabilities=engine), 3, TOL)
    assert result.passed and result.data["arrangements"] == 4
    shifted = checks.determinism_padding(_golden(3, 5, 7), Scripted(capabilities=engine, batch_shift=LARGE), 3, TOL)
    assert not shifted.passed
    assert "one request of 2" in shifted.detail and "concurrent requests" not in shifted.detail


# degeneration and its loop finder


@pytest.mark.parametrize(
    ("ids", "expected"),
    [
        ([9, 1, 1, 1, 1, 1, 1], (1, 6)),
        ([9, 1, 1, 1, 1, 1], None),  # 5 repeats of a token: not yet a loop
        ([1, 1, 1, 1, 1, 1], (1, 6)),  # the loop may fill the whole output
        ([9, 1, 2, 1, 2, 1, 2, 1, 2], (2, 4)),
        ([1, 2, 1, 2, 1, 2], None),
        ([5, 1, 2, 3, 1, 2, 3, 1, 2, 3], (3, 3)),
        ([4, 3, 2, 1, 4, 3, 2, 1, 4, 3, 2, 1], (4, 3)),
        ([4, 3, 2, 1, 4, 3, 2, 1], None),
        ([], None),
        ([7], None),
    ],
)
def test_loop_of(ids, expected):
    assert checks.loop_of(ids) == expected


def _greedy(name: str, got: Sequence[int], ref: Sequence[int]) -> GreedyResult:
    prompt = GoldenPrompt(name, "short", None, (1, 2), tuple(ref), ())
    return GreedyResult(prompt, Generation(tuple(got), ()), None, False, "")


def test_degeneration_fails_only_on_a_loop_the_reference_lacks():
    stuck, fine = [4] * 7, [1, 2, 3, 4, 5, 6, 7]  # a model emitting one token forever leaves the reference at once
    result = checks.degeneration([_greedy("a", stuck, fine), _greedy("b", stuck, stuck), _greedy("c", fine, fine)])
    assert not result.passed and result.required
    assert result.detail == "a: 1-gram repeated 7x at the end (reference does not loop)"
    clean = checks.degeneration([_greedy("b", stuck, stuck), _greedy("c", fine, fine)])
    assert clean.passed and clean.detail == "2 continuations: no loop the reference lacks"


def test_degeneration_fails_a_loop_begun_where_the_reference_moved_on():
    # The reference said 3 once and moved on; on the same text the candidate keeps saying 3.
    result = checks.degeneration([_greedy("a", [1, 2, 3, 3, 3, 3, 3, 3], [1, 2, 3, 4, 5, 6, 7, 8])])
    assert not result.passed and result.detail == "a: 1-gram repeated 6x at the end (reference does not loop)"
    assert result.data["loops"] == [{"prompt": "a", "period": 1, "repeats": 6, "start": 2, "left_reference_at": 3,
                                     "attributable": True}]  # fmt: skip


def test_degeneration_lists_a_loop_begun_on_text_the_reference_never_continued():
    # The candidate left the reference's text at token 2 (greedy_parity's finding, or a quantized candidate's
    # budget); its loop from token 3 is on its own text, which the goldens say nothing about.
    result = checks.degeneration([_greedy("a", [1, 2, 9, 5, 5, 5, 5, 5, 5], [1, 2, 3, 4, 5, 6, 7, 8, 9])])
    assert result.passed, result.detail
    assert result.detail == (
        "1 continuations: no loop begun on the reference's text; not counted (the goldens do not say whether the reference "
        "loops on the candidate's own text): a: 1-gram repeated 6x at the end, from generated token 3, after "
        "leaving the reference's text at token 2"
    )
    assert result.data["loops"][0]["attributable"] is False


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [([1, 2, 3], [1, 2, 3], None), ([1, 2, 3], [1, 9, 3], 1), ([1, 2], [1, 2, 3], 2), ([], [1], 0), ([], [], None)],
)
def test_first_difference(a, b, expected):
    assert first_difference(a, b) == expected


# stop_set


def test_stop_set_skipped_without_stop_tokens_or_without_forcing():
    no_stops = checks.stop_set(_golden(3), Scripted())
    no_force = checks.stop_set(
        _golden(3, manifest={"stop_token_ids": [7]}), Scripted(capabilities=Capabilities(force_token=False))
    )
    for result in (no_stops, no_force):
        assert (result.passed, result.required, result.skipped) == (False, False, True)
    assert "no stop tokens" in no_stops.detail and "logit_bias" in no_force.detail


def test_stop_set_passes_when_every_declared_token_stops():
    golden = _golden(3, 5, manifest={"stop_token_ids": [7, 8]})
    result = checks.stop_set(golden, Scripted(stop_ids=(7, 8), honours=(7, 8)))
    assert result.passed and result.required
    assert result.data == {"stop_token_ids": [7, 8], "honoured": [7, 8]}


def test_stop_set_names_the_token_that_does_not_stop_and_the_fix():
    golden = _golden(3, 5, manifest={"stop_token_ids": [7, 8]})
    result = checks.stop_set(golden, Scripted(stop_ids=(7,), honours=(7,)))
    assert not result.passed
    assert "8: generation continued (4 tokens, finish_reason length)" in result.detail
    assert "7:" not in result.detail
    assert "add [8] to generation_config.json eos_token_id" in result.detail


def test_stop_set_reports_a_token_it_could_not_force():
    golden = _golden(3, manifest={"stop_token_ids": [7, 8]})
    result = checks.stop_set(golden, Scripted(honours=(7, 8), unforceable=(8,)))
    assert not result.passed
    assert result.detail.startswith("8: could not be forced (got [])")
    assert "add" not in result.detail  # the candidate says nothing of its stop set: no fix to suggest


def test_stop_set_one_token_and_stop_still_fails_when_the_engine_says_length():
    class SaysLength(Scripted):
        def generate(self, *args, **kwargs):
            return [Generation(g.ids, g.steps, "length") for g in super().generate(*args, **kwargs)]

    golden = _golden(3, manifest={"stop_token_ids": [7]})
    result = checks.stop_set(golden, SaysLength(honours=(7,)))
    assert not result.passed and "7: generation continued (1 tokens, finish_reason length)" in result.detail


# nan_inf_scan


def test_nan_inf_scan_counts_positions_and_names_the_first_module():
    good, bad = TopK((1, 2), (-0.1, -2.0)), TopK((1, 2), (-0.1, math.nan))
    inf = TopK((1, 2), (-math.inf, -2.0))
    layers = [LayerStat("embed", 1.0, 0), LayerStat("layers.3.mlp", 2.0, 5), LayerStat("layers.4.mlp", 2.0, 9)]
    result = checks.nan_inf_scan([[good, bad], [inf, good]], layers)
    assert not result.passed and result.required
    assert (
        result.detail == "2 positions with NaN/inf logprobs; non-finite activations first in layers.3.mlp (2 modules)"
    )


def test_nan_inf_scan_passes_and_says_what_it_saw():
    good = TopK((1, 2), (-0.1, -2.0))
    with_hooks = checks.nan_inf_scan([[good]], [LayerStat("embed", 1.0, 0)])
    without = checks.nan_inf_scan([[good]], None)
    assert with_hooks.passed and with_hooks.detail == "all finite (logprobs and per-module activations)"
    assert without.passed and without.detail == "all finite (logprobs only (activations not observable))"


# fp16_overflow


def _stats(**peaks: float) -> dict:
    return {"activation_max_abs": {name.replace("_", "."): value for name, value in peaks.items()}}


def test_fp16_overflow_skipped_without_any_statistics():
    result = checks.fp16_overflow(_golden(3), "float16", None)
    assert (result.passed, result.required, result.skipped) == (False, False, True)


def test_fp16_overflow_reference_beyond_float16_fails_and_names_the_worst_module():
    golden = _golden(3, manifest=_stats(layers_1=70000.0, layers_2=1.2e5, layers_0=10.0))
    result = checks.fp16_overflow(golden, "float16", None)
    assert not result.passed
    assert result.detail == (
        "reference activations exceed the float16 range (65504) in 2 modules, worst layers.2 = 1.2e+05"
    )
    assert result.data == {"headroom": pytest.approx(65504.0 / 1.2e5)}
    assert checks.fp16_overflow(golden, "bfloat16", None).passed  # the same model fits bf16


def test_fp16_overflow_exactly_at_the_limit_is_not_an_overflow():
    golden = _golden(3, manifest=_stats(layers_0=65504.0))
    result = checks.fp16_overflow(golden, "float16", None)
    assert result.passed and "(warning: below x4; other inputs may overflow)" in result.detail


def test_fp16_overflow_candidate_activations_fail_when_nonfinite_or_beyond_the_range():
    layers = [LayerStat("a", 10.0, 0), LayerStat("b", 1.0, 3), LayerStat("c", 7e4, 0)]
    result = checks.fp16_overflow(_golden(3), "float16", layers)
    assert not result.passed
    assert result.detail == "candidate overflows float16 in 2 modules, first b"
    assert result.data == {"headroom": None}  # no reference statistics: no finite headroom


def test_fp16_overflow_headroom_warning_only_below_x4():
    near = checks.fp16_overflow(_golden(3, manifest=_stats(layers_0=20000.0)), "float16", None)
    roomy = checks.fp16_overflow(_golden(3, manifest=_stats(layers_0=16376.0, layers_1=3.0)), "float16", None)
    assert near.passed and near.detail == (
        "peak reference activation 2e+04 in layers.0: headroom x3.28 in float16 (warning: below x4; other inputs may "
        "overflow)"
    )
    assert roomy.passed and roomy.detail == "peak reference activation 1.638e+04 in layers.0: headroom x4 in float16"
    assert near.data["headroom"] == pytest.approx(65504.0 / 20000.0)


def test_fp16_overflow_both_sides_reported_and_candidate_at_the_limit_fits():
    layers = [LayerStat("a", 65504.0, 0), LayerStat("b", 7e4, 0)]
    result = checks.fp16_overflow(_golden(3, manifest=_stats(layers_0=7e4)), "float16", layers)
    assert result.detail == (
        "reference activations exceed the float16 range (65504) in 1 modules, worst layers.0 = 7e+04; "
        "candidate overflows float16 in 1 modules, first b"
    )
    alone = checks.fp16_overflow(_golden(3), "float16", [LayerStat("a", 65504.0, 0)])
    assert alone.passed and alone.detail == "peak reference activation 0 in -: headroom xinf in float16"


def test_every_check_reports_under_its_checklist_name():
    golden, cand = _golden(3, 5, manifest={"stop_token_ids": [7]}), Scripted(honours=(7,))
    no_caps = Scripted(capabilities=Capabilities(batch=False, padding=False, force_token=False))
    results = {
        "determinism_repeat": [checks.determinism_repeat(golden, cand, 3, TOL)],
        "determinism_batch": [checks.determinism_batch(golden, c, 3, TOL) for c in (cand, no_caps)],
        "determinism_padding": [checks.determinism_padding(golden, c, 3, TOL) for c in (cand, no_caps)],
        "degeneration": [checks.degeneration([])],
        "stop_set": [checks.stop_set(golden, c) for c in (cand, no_caps)]
        + [checks.stop_set(GoldenSet(Path("."), {}, golden.prompts), cand)],
        "nan_inf_scan": [checks.nan_inf_scan([], None)],
        "fp16_overflow": [checks.fp16_overflow(golden, "float16", x) for x in (None, [LayerStat("a", 1.0, 0)])],
    }
    for name, found in results.items():
        for result in found:
            assert result.name == name
            if result.skipped:  # a skip says why and is never required-and-passed
                assert result.detail.startswith("not checked: ") and not result.passed and not result.required
            else:
                assert result.passed and result.required, (name, result.detail)
    assert "activation_max_abs" in results["fp16_overflow"][0].detail  # what would make it checkable
    assert "several prompts per call" in results["determinism_batch"][1].detail


def test_fp16_overflow_refuses_a_dtype_without_a_range():
    """A dtype DTYPE_MAX lacks is refused by name (it used to be judged against float32's range, by chance)."""
    golden = _golden(3, manifest=_stats(layers_0=1e38))
    assert checks.fp16_overflow(golden, "float32", None).passed
    assert not checks.fp16_overflow(_golden(3, manifest=_stats(layers_0=1e39)), "float32", None).passed
    with pytest.raises(UnknownDtype, match=r"dtype 'int8' has no largest finite value .*\(known: float16, bfloat16"):
        checks.fp16_overflow(golden, "int8", None)
