"""SwiGLU kernel vs its float64 reference, the reference vs transformers' LlamaMLP activation, and dispatch."""

from __future__ import annotations

import pytest
import torch

from onboard.kernels import dispatch
from onboard.kernels.swiglu import swiglu_reference, swiglu_triton
from tests.kernels.tolerances import DTYPES, assert_close_verbose, dev

SHAPES = [(3, 5, 37), (7, 96), (1, 1), (64, 130)]


def _inputs(shape: tuple[int, ...], dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return (torch.randn(shape, generator=g) * 4).to(dtype), torch.randn(shape, generator=g).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_triton_matches_float64_reference(shape: tuple[int, ...], dtype: torch.dtype) -> None:
    gate, up = _inputs(shape, dtype)
    out = swiglu_triton(dev(gate), dev(up))
    assert out.dtype == dtype and out.shape == gate.shape
    assert_close_verbose(out, swiglu_reference(gate.double(), up.double()), dtype)


def test_triton_on_chunks_of_a_fused_gate_up() -> None:
    gate_up = torch.randn(2, 9, 2 * 37)
    gate, up = dev(gate_up).chunk(2, dim=-1)  # strided views, as in HF's fused gate_up_proj
    assert_close_verbose(swiglu_triton(dev(gate), dev(up)), swiglu_reference(gate.double(), up.double()), torch.float32)


@pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")  # numpy, in the interpreter
def test_large_gate_does_not_overflow() -> None:
    gate = torch.tensor([[-1e4, -100.0, 0.0, 100.0, 1e4]])
    up = torch.ones_like(gate)
    assert_close_verbose(
        swiglu_triton(dev(gate), dev(up)), swiglu_reference(gate.double().cpu(), up.double().cpu()), torch.float32
    )


def test_reference_equals_transformers_silu_mlp_activation() -> None:
    from transformers.activations import ACT2FN

    gate, up = _inputs((4, 33), torch.float32)
    torch.testing.assert_close(swiglu_reference(gate, up), ACT2FN["silu"](gate) * up, atol=1e-6, rtol=1e-6)


def test_dispatch_uses_reference_on_cpu() -> None:
    gate, up = _inputs((5, 37), torch.bfloat16)
    assert torch.equal(dispatch.swiglu(gate, up), swiglu_reference(gate, up))


def test_shape_mismatch_rejected() -> None:
    with pytest.raises(ValueError, match="same shape"):
        swiglu_triton(dev(torch.randn(2, 3)), dev(torch.randn(2, 4)))
