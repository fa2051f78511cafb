"""The comparison helper itself: NaN/inf fail, the report names indices, the table covers the kernel dtypes."""

from __future__ import annotations

import pytest
import torch

from tests.kernels.tolerances import TOLERANCES, assert_close_verbose


def test_table_covers_kernel_dtypes() -> None:
    assert set(TOLERANCES) == {torch.float32, torch.float16, torch.bfloat16}


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_counts_as_mismatch_even_when_equal(bad: float) -> None:
    a = torch.tensor([1.0, bad])
    with pytest.raises(AssertionError, match=r"1 of 2 elements.*\n  at \(1,\)"):
        assert_close_verbose(a, a.clone().double(), torch.float32)


def test_reports_first_mismatching_indices() -> None:
    expected = torch.zeros(3, 4, dtype=torch.float64)
    actual = expected.clone().float()
    actual[2, 1] = 0.5
    with pytest.raises(AssertionError, match=r"at \(2, 1\): actual=0.5 expected=0"):
        assert_close_verbose(actual, expected, torch.bfloat16)


def test_within_tolerance_passes() -> None:
    e = torch.linspace(-4, 4, 101, dtype=torch.float64)
    assert_close_verbose(e.to(torch.bfloat16), e, torch.bfloat16)
    assert_close_verbose(e.to(torch.float16), e, torch.float16)
