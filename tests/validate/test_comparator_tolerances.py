"""The tolerances validate and parity judge with: the threshold table, goldens without a calibration, and goldens
recorded before the distribution statistics (their manifests lack kl_sd, kl_p99, the late group, the slope, the swap
rate and the margin noise): each missing statistic is replaced by a stand-in that can only widen the tolerance."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys

import pytest

import onboard.comparator
from onboard.comparator import (
    DTYPE_COLUMNS,
    SAMPLE_SIGMAS,
    THRESHOLDS,
    NoiseStats,
    Tolerances,
    TopK,
    agreement,
    threshold,
    tolerances,
)
from onboard.errors import InputError, UnknownDtype

RULES = ("kl_mean", "kl_late", "kl_tail", "kl_max", "max_logprob_error", "logit_scale", "top1_swaps", "near_tie",
         "point_error", "token_wise")  # fmt: skip
NEVER_CALIBRATED = ("token_wise",)
"""Rules with no reference statistic to scale: the bound alone applies, whatever is measured."""
# Tolerances field -> the THRESHOLDS row that sets it.
FIELD_RULE = {
    "max_logprob_error": "max_logprob_error",
    "kl_max": "kl_max",
    "kl_mean": "kl_mean",
    "logit_scale": "logit_scale",
    "near_tie": "near_tie",
    "kl_tail_level": "kl_tail",
    "kl_late_mean": "kl_late",
    "swap_rate": "top1_swaps",
}


def bound(table: dict, rule: str, dtype: str, measured: float) -> float:
    """The documented rule: max(floor, multiplier x the reference's own statistic)."""
    return max(table[rule]["floor"][dtype], table[rule]["multiplier"] * measured)


def full_noise(**changes: object) -> NoiseStats:
    """A bfloat16 calibration with every distribution statistic measured (a current golden)."""
    base = NoiseStats("bfloat16", "bfloat16", max_logprob_error=0.2, kl_max=0.004, kl_mean=3e-5, logit_scale=0.01,
                      positions=500, kl_sd=2e-4, kl_p99=1e-3, kl_late_mean=5e-5, kl_late_sd=3e-4, late_positions=180,
                      slope_deviation=2e-3, swap_rate=0.01, margin_max=0.3, swaps=("p0:7", "p2:91"))  # fmt: skip
    return dataclasses.replace(base, **changes)


def legacy_noise() -> NoiseStats:
    """The same calibration as an older manifest stores it: only the worst-case statistics."""
    return NoiseStats("bfloat16", "bfloat16", max_logprob_error=0.2, kl_max=0.004, kl_mean=3e-5, logit_scale=0.01,
                      positions=500)  # fmt: skip


def fields(tol: Tolerances) -> dict[str, object]:
    return dataclasses.asdict(tol)


def test_a_current_golden_sets_every_tolerance_from_its_own_statistic() -> None:
    n = full_noise()
    tol = tolerances("bfloat16", n)
    assert tol.calibrated and tol.dtype == "bfloat16"
    assert tol.max_logprob_error == bound(THRESHOLDS, "max_logprob_error", "bfloat16", n.max_logprob_error)
    assert tol.kl_max == bound(THRESHOLDS, "kl_max", "bfloat16", n.kl_max)
    assert tol.kl_mean == bound(THRESHOLDS, "kl_mean", "bfloat16", n.kl_mean)
    assert tol.kl_sd == pytest.approx(THRESHOLDS["kl_mean"]["multiplier"] * n.kl_sd)
    assert tol.kl_tail_level == bound(THRESHOLDS, "kl_tail", "bfloat16", n.kl_p99)
    assert tol.kl_late_mean == bound(THRESHOLDS, "kl_late", "bfloat16", n.kl_late_mean)
    assert tol.kl_late_sd == pytest.approx(THRESHOLDS["kl_late"]["multiplier"] * n.kl_late_sd)
    # The slope deviation judges, not the worst per-prompt ratio (kept for reports).
    assert tol.logit_scale == bound(THRESHOLDS, "logit_scale", "bfloat16", n.slope_deviation)
    assert tol.swap_rate == bound(THRESHOLDS, "top1_swaps", "bfloat16", n.swap_rate)
    # Margin noise: the largest margin change (0.3), larger here than the worst logprob error (0.2).
    assert tol.near_tie == bound(THRESHOLDS, "near_tie", "bfloat16", 0.3)
    assert tol.reference_swaps == ("p0:7", "p2:91")


def test_the_worst_logprob_error_widens_the_near_tie_gap_when_larger_than_the_margin_noise() -> None:
    """Heavy-tailed noise (MoE routing flips) moves whole distributions: a margin can move as far as any logprob."""
    tol = tolerances("bfloat16", full_noise(margin_max=0.05))
    assert tol.near_tie == bound(THRESHOLDS, "near_tie", "bfloat16", 0.2)


def test_a_golden_without_the_distribution_statistics_is_judged_with_conservative_stand_ins() -> None:
    """Each missing statistic is replaced by one at least as large: the sd and p99 by the max KL, the late group by
    the overall one, the slope by the worst per-prompt ratio, the swap rate by 1, the margin noise by twice the worst
    logprob error."""
    legacy = legacy_noise()
    stand_ins = dataclasses.replace(legacy, kl_sd=legacy.kl_max, kl_p99=legacy.kl_max, kl_late_mean=legacy.kl_mean,
                                    late_positions=0, slope_deviation=legacy.logit_scale, swap_rate=1.0,
                                    margin_max=2 * legacy.max_logprob_error)  # fmt: skip
    assert fields(tolerances("bfloat16", legacy)) == fields(tolerances("bfloat16", stand_ins))
    tol = tolerances("bfloat16", legacy)
    assert tol.calibrated and tol.reference_swaps == ()
    assert tol.kl_late_sd == tol.kl_sd == pytest.approx(THRESHOLDS["kl_mean"]["multiplier"] * legacy.kl_max)
    assert tol.swap_rate == THRESHOLDS["top1_swaps"]["multiplier"] * 1.0


def test_the_stand_ins_never_narrow_a_tolerance() -> None:
    """The same calibration, measured in full (every statistic below its stand-in), never gets a wider tolerance."""
    old, new = fields(tolerances("bfloat16", legacy_noise())), fields(tolerances("bfloat16", full_noise()))
    for name in ("kl_sd", "kl_tail_level", "kl_late_sd", "logit_scale", "swap_rate", "near_tie"):
        assert old[name] > new[name], name
    for name in ("max_logprob_error", "kl_max", "kl_mean"):
        assert old[name] == new[name], name
    # The late group's stand-in mean (the overall one) is below this calibration's late mean, but its sd stand-in
    # (the max KL) more than makes up for it: the late limit judge applies is wider at any number of late positions.
    for late in (1, 64, 288, 10_000):
        old_limit = old["kl_late_mean"] + SAMPLE_SIGMAS * old["kl_late_sd"] / late**0.5
        assert old_limit > new["kl_late_mean"] + SAMPLE_SIGMAS * new["kl_late_sd"] / late**0.5, late


def test_a_calibration_with_no_late_positions_judges_the_late_group_by_the_overall_distribution() -> None:
    """noise_from stores a late mean and sd of 0 when the calibration prompts all end before LATE_FROM: a late
    tolerance of 0 would fail every candidate's long prompts, so the overall mean and sd stand in."""
    short = full_noise(kl_late_mean=0.0, kl_late_sd=0.0, late_positions=0)
    tol = tolerances("bfloat16", short)
    assert tol.kl_late_mean == bound(THRESHOLDS, "kl_late", "bfloat16", short.kl_mean)
    assert tol.kl_late_sd == pytest.approx(THRESHOLDS["kl_late"]["multiplier"] * short.kl_sd)


def test_a_single_late_position_is_a_late_group() -> None:
    n = full_noise(late_positions=1)
    assert tolerances("bfloat16", n).kl_late_mean == bound(THRESHOLDS, "kl_late", "bfloat16", n.kl_late_mean)


def test_late_positions_without_a_late_sd_use_the_overall_sd() -> None:
    n = full_noise(kl_late_sd=None)
    tol = tolerances("bfloat16", n)
    assert tol.kl_late_mean == bound(THRESHOLDS, "kl_late", "bfloat16", n.kl_late_mean)
    assert tol.kl_late_sd == pytest.approx(THRESHOLDS["kl_late"]["multiplier"] * n.kl_sd)


@pytest.mark.parametrize("dtype", DTYPE_COLUMNS)
def test_a_quiet_reference_is_held_to_the_floor_of_its_dtype(dtype: str) -> None:
    quiet = NoiseStats(dtype, "float64", 0.0, 0.0, 0.0, 0.0, 100, kl_sd=0.0, kl_p99=0.0, kl_late_mean=0.0,
                       kl_late_sd=0.0, late_positions=40, slope_deviation=0.0, swap_rate=0.0, margin_max=0.0)  # fmt: skip
    tol = fields(tolerances(dtype, quiet))
    for name, rule in FIELD_RULE.items():
        assert tol[name] == THRESHOLDS[rule]["floor"][dtype], name
    assert tol["kl_sd"] == tol["kl_late_sd"] == 0.0


@pytest.mark.parametrize("dtype", DTYPE_COLUMNS)
def test_without_a_calibration_the_uncalibrated_column_applies_alone(dtype: str) -> None:
    for noise in (None, dataclasses.replace(full_noise(), dtype=dtype, nonfinite=True)):
        tol = fields(tolerances(dtype, noise))
        assert tol.pop("calibrated") is False and tol.pop("dtype") == dtype
        assert tol.pop("kl_sd") == tol.pop("kl_late_sd") == 0.0 and tol.pop("reference_swaps") == ()
        assert tol == {name: THRESHOLDS[rule]["uncalibrated"][dtype] for name, rule in FIELD_RULE.items()}


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "fp16", "Float32", ""])
def test_a_dtype_without_its_own_column_is_refused_naming_it_and_the_known_dtypes(dtype: str) -> None:
    """A server may report, or a user type, a dtype the table has no column for: validate stops with an input error
    (exit 2) naming it and the dtypes it could judge, with or without a calibration, rather than judging it with
    another dtype's bounds (float32's used to apply silently: a strict bar no low-precision engine can meet)."""
    for noise in (None, full_noise(dtype=dtype)):
        with pytest.raises(UnknownDtype, match=f"dtype {dtype!r} has no column") as raised:
            tolerances(dtype, noise)
        assert isinstance(raised.value, InputError) and raised.value.exit_code == 2
        assert raised.value.message.endswith("(known: float64, float32, float16, bfloat16)")
        assert raised.value.hint == "give the candidate's dtype as one of float64, float32, float16, bfloat16"


@pytest.mark.parametrize("dtype", ["float64", "fp8"])
def test_parity_in_a_dtype_without_a_calibration_run_is_refused_naming_the_calibrated_ones(dtype: str) -> None:
    """generate's parity measures the reference's own run in CALIBRATION[dtype]: a dtype with none (float64 has a
    threshold column but no calibration run) is an input error naming the three it can judge, not a KeyError."""
    row = [TopK((1, 2), (-0.1, -2.5))]
    with pytest.raises(UnknownDtype, match=f"dtype {dtype!r} has no calibration run") as raised:
        agreement(dtype, [row], [row], [[row]], [[1]])
    assert raised.value.message.endswith("(known: float32, bfloat16, float16)")
    assert agreement("float32", [row], [row], [[row]], [[1]]).passed  # the same rows in a known dtype are judged


def test_lower_precision_never_gets_a_tighter_bound_and_the_uncalibrated_column_is_the_wider() -> None:
    """The table's shape users rely on: float64 <= float32 <= float16 <= bfloat16 in every column, and without a
    calibration no bound is tighter than the calibrated floor."""
    assert DTYPE_COLUMNS == ("float64", "float32", "float16", "bfloat16")
    for rule in RULES:
        for column in ("floor", "uncalibrated"):
            values = [THRESHOLDS[rule][column][d] for d in DTYPE_COLUMNS]
            assert values == sorted(values) and values[0] > 0, (rule, column)
        assert all(THRESHOLDS[rule]["uncalibrated"][d] >= THRESHOLDS[rule]["floor"][d] for d in DTYPE_COLUMNS), rule


def _fresh_comparator():
    """onboard/comparator.py executed again, as a new module: the table is built at import (once per process), so
    this is how a test sees the table that file builds now."""
    name = onboard.comparator.__name__  # under its own name, as an import would run it
    spec = importlib.util.spec_from_file_location(name, onboard.comparator.__file__)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses resolve their module while the class is created
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules[name] = onboard.comparator
    return module


def test_the_threshold_table_states_each_rules_statistic_multiplier_and_bounds_per_dtype() -> None:
    """validate writes THRESHOLDS into its result (report.build_result): every rule with what it compares (`stat`),
    why its multiplier is what it is (`why`), and its floor and uncalibrated bound named by dtype."""
    fresh = _fresh_comparator()
    table = fresh.THRESHOLDS
    assert sorted(table) == sorted(RULES)
    for rule in RULES:
        entry = table[rule]
        assert sorted(entry) == ["floor", "multiplier", "stat", "uncalibrated", "why"], rule
        assert isinstance(entry["stat"], str) and len(entry["stat"]) > 20, rule
        assert isinstance(entry["why"], str) and len(entry["why"]) > 40 and entry["why"] != entry["stat"], rule
        if rule in NEVER_CALIBRATED:
            assert entry["multiplier"] == 1.0 and entry["floor"] == entry["uncalibrated"], rule
        else:
            assert entry["multiplier"] > 1.0, rule
        for column in ("floor", "uncalibrated"):
            assert list(entry[column]) == list(DTYPE_COLUMNS), (rule, column)
        assert all(entry["uncalibrated"][d] >= entry["floor"][d] for d in DTYPE_COLUMNS), rule
    # The table the fresh file builds is the one this process judges with.
    assert table == THRESHOLDS
    for noise in (None, full_noise()):
        assert fields(fresh.tolerances("bfloat16", noise)) == fields(tolerances("bfloat16", noise))


def test_threshold_reads_a_rule_of_the_table_for_checks_outside_the_distribution_verdict() -> None:
    """The first-divergence bisect and quantize-plan's runner take their bounds from the same table: the calibrated
    bound scales the reference's own statistic above the floor, the uncalibrated one applies without it."""
    row = THRESHOLDS["point_error"]
    assert threshold("point_error", "float32") == row["uncalibrated"]["float32"] == 1e-4
    assert threshold("point_error", "bfloat16", 1e-9) == row["floor"]["bfloat16"]
    assert threshold("point_error", "bfloat16", 0.05) == pytest.approx(row["multiplier"] * 0.05)
    assert threshold("token_wise", "float16") == THRESHOLDS["token_wise"]["uncalibrated"]["float16"] == 1e-2


@pytest.mark.parametrize("rule", ["point_error", "token_wise", "kl_max"])
def test_threshold_refuses_a_dtype_without_a_column(rule: str) -> None:
    for measured in (None, 0.1):
        with pytest.raises(UnknownDtype, match=r"dtype 'float8_e4m3fn' has no column .*\(known: float64, float32"):
            threshold(rule, "float8_e4m3fn", measured)
