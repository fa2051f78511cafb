"""RMSNorm kernel vs its float64 reference, the reference vs transformers' Llama and Gemma norms, and dispatch."""

from __future__ import annotations

import pytest
import torch

from onboard.kernels import dispatch
from onboard.kernels.rmsnorm import rms_norm_reference, rms_norm_triton
from tests.kernels.tolerances import DTYPES, assert_close_verbose, dev

SHAPES = [(3, 5, 37), (7, 96), (8, 1), (1, 130)]


def _inputs(shape: tuple[int, ...], dtype: torch.dtype, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=g) * 3).to(dtype)
    w = (torch.randn(shape[-1], generator=g) * 0.5 + 1).to(dtype)
    return x, w


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("offset", [0.0, 1.0])
def test_triton_matches_float64_reference(shape: tuple[int, ...], dtype: torch.dtype, offset: float) -> None:
    x, w = _inputs(shape, dtype)
    out = rms_norm_triton(dev(x), dev(w), 1e-6, offset)
    assert out.dtype == dtype and out.shape == x.shape
    assert_close_verbose(out, rms_norm_reference(x.double(), w.double(), 1e-6, offset), dtype)


def test_triton_strided_rows_and_explicit_casting() -> None:
    x, w = _inputs((6, 74), torch.float32)
    view = x[:, :37]  # non-contiguous rows: the wrapper copies, the result must not change
    expected = rms_norm_reference(view.double(), w[:37].double(), 1e-5, 1.0, casting="llama")
    assert_close_verbose(
        rms_norm_triton(dev(x)[:, :37], dev(w)[:37], 1e-5, 1.0, casting="llama"), expected, torch.float32
    )


def test_llama_and_gemma_casting_differ_in_bf16() -> None:
    # The two conventions must not be interchangeable: in bf16 they round at different points.
    x, w = _inputs((16, 64), torch.bfloat16, seed=3)
    llama = rms_norm_reference(x, w, 1e-6, 1.0, casting="llama")
    gemma = rms_norm_reference(x, w, 1e-6, 1.0, casting="gemma")
    assert not torch.equal(llama, gemma)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_reference_equals_transformers_llama_rmsnorm(dtype: torch.dtype) -> None:
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    x, w = _inputs((4, 9, 48), dtype, seed=1)
    hf = LlamaRMSNorm(48, eps=1e-5).to(dtype)
    with torch.no_grad():
        hf.weight.copy_(w)
        expected = hf(x)
    assert torch.equal(rms_norm_reference(x, w, 1e-5, 0.0), expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_reference_equals_transformers_gemma_rmsnorm(dtype: torch.dtype) -> None:
    from transformers.models.gemma.modeling_gemma import GemmaRMSNorm

    x, w = _inputs((4, 9, 48), dtype, seed=2)
    w = w - 1  # Gemma stores w - 1
    hf = GemmaRMSNorm(48, eps=1e-6).to(dtype)
    with torch.no_grad():
        hf.weight.copy_(w)
        expected = hf(x)
    assert torch.equal(rms_norm_reference(x, w, 1e-6, 1.0), expected)


def test_dispatch_uses_reference_on_cpu() -> None:
    x, w = _inputs((5, 37), torch.bfloat16)
    assert not dispatch.use_triton(x)
    assert torch.equal(dispatch.rms_norm(x, w, 1e-6, 1.0), rms_norm_reference(x, w, 1e-6, 1.0))


def test_bad_casting_and_weight_shape_rejected() -> None:
    x, w = _inputs((2, 8), torch.float32)
    with pytest.raises(ValueError, match="casting"):
        rms_norm_reference(x, w, 1e-6, casting="mistral")
    with pytest.raises(ValueError, match="weight"):
        rms_norm_triton(dev(x), dev(w)[:4], 1e-6)
