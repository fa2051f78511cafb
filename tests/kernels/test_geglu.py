"""GeGLU kernel (tanh and exact GELU) vs its float64 reference, the reference vs transformers' GELU activations."""

from __future__ import annotations

import pytest
import torch

from onboard.kernels import dispatch
from onboard.kernels.geglu import geglu_reference, geglu_triton
from tests.kernels.tolerances import DTYPES, assert_close_verbose, dev

SHAPES = [(3, 5, 37), (7, 96), (64, 130)]


def _inputs(shape: tuple[int, ...], dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return (torch.randn(shape, generator=g) * 4).to(dtype), torch.randn(shape, generator=g).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("approximate", ["tanh", "none"])
def test_triton_matches_float64_reference(shape: tuple[int, ...], dtype: torch.dtype, approximate: str) -> None:
    gate, up = _inputs(shape, dtype)
    out = geglu_triton(dev(gate), dev(up), approximate)
    assert out.dtype == dtype and out.shape == gate.shape
    assert_close_verbose(out, geglu_reference(gate.double(), up.double(), approximate), dtype)


@pytest.mark.parametrize("approximate", ["tanh", "none"])
def test_extreme_gates(approximate: str) -> None:
    gate = torch.tensor([[-1e4, -30.0, -1e-3, 0.0, 1e-3, 30.0, 1e4]])
    up = torch.ones_like(gate)
    expected = geglu_reference(gate.double(), up.double(), approximate)
    assert_close_verbose(geglu_triton(dev(gate), dev(up), approximate), expected, torch.float32)


@pytest.mark.parametrize(("act", "approximate"), [("gelu_pytorch_tanh", "tanh"), ("gelu", "none")])
def test_reference_equals_transformers_activation(act: str, approximate: str) -> None:
    from transformers.activations import ACT2FN

    gate, up = _inputs((4, 33), torch.float32)
    expected = ACT2FN[act](gate) * up
    torch.testing.assert_close(geglu_reference(gate, up, approximate), expected, atol=2e-6, rtol=2e-6)


def test_dispatch_uses_reference_on_cpu() -> None:
    gate, up = _inputs((5, 37), torch.float16)
    assert torch.equal(dispatch.geglu(gate, up, "none"), geglu_reference(gate, up, "none"))


def test_unknown_approximation_rejected() -> None:
    with pytest.raises(ValueError, match="approximate"):
        geglu_reference(torch.randn(2, 3), torch.randn(2, 3), "sigmoid")
