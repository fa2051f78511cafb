"""Soft-capping kernel vs its float64 reference, the reference vs Gemma 2's in-model formula, and dispatch."""

from __future__ import annotations

import pytest
import torch

from onboard.kernels import dispatch
from onboard.kernels.softcap import softcap_reference, softcap_triton
from tests.kernels.tolerances import DTYPES, assert_close_verbose, dev

SHAPES = [(3, 5, 37), (7, 96), (2, 3, 5, 11), (1000,)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("cap", [30.0, 50.0])
def test_triton_matches_float64_reference(shape: tuple[int, ...], dtype: torch.dtype, cap: float) -> None:
    x = (torch.randn(shape, generator=torch.Generator().manual_seed(0)) * 40).to(dtype)
    out = softcap_triton(dev(x), cap)
    assert out.dtype == dtype and out.shape == x.shape
    assert_close_verbose(out, softcap_reference(x.double(), cap), dtype)


def test_saturates_without_nan() -> None:
    x = torch.tensor([-1e30, -1e4, -1e-6, 0.0, 1e-6, 1e4, 1e30])
    out = softcap_triton(dev(x), 30.0).cpu()
    assert_close_verbose(out, softcap_reference(x.double(), 30.0), torch.float32)
    assert out[0] == -30.0 and out[-1] == 30.0


def test_reference_equals_gemma2_formula() -> None:
    # Gemma2's final logits: logits / cap -> tanh -> * cap (modeling_gemma2.Gemma2ForCausalLM.forward)
    x = torch.randn(4, 50) * 100
    cap = 30.0
    torch.testing.assert_close(softcap_reference(x, cap), torch.tanh(x / cap) * cap, atol=0, rtol=0)


def test_dispatch_uses_reference_on_cpu() -> None:
    x = torch.randn(5, 37, dtype=torch.bfloat16) * 60
    assert torch.equal(dispatch.softcap(x, 50.0), softcap_reference(x, 50.0))


def test_non_positive_cap_rejected() -> None:
    with pytest.raises(ValueError, match="cap"):
        softcap_triton(dev(torch.randn(3)), 0.0)
