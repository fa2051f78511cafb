"""dispatch: CPU tensors take the reference path; ONBOARD_KERNELS=triton pushes whole blocks through the Triton
kernels (interpreter on CPU), which must agree with the reference path."""

from __future__ import annotations

import pytest
import torch

from onboard.blocks.attention import Attention
from onboard.blocks.embeddings import LMHead
from onboard.blocks.mlp import GatedMLP
from onboard.blocks.norms import QKNormSpec, RMSNorm
from onboard.blocks.rotary import RopeConfig, RotaryEmbedding
from onboard.kernels import dispatch
from tests.kernels.tolerances import KERNEL_DEVICE


def test_cpu_tensors_take_the_reference_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(dispatch.BACKEND_ENV, raising=False)
    assert not dispatch.use_triton(torch.zeros(1))
    monkeypatch.setenv(dispatch.BACKEND_ENV, "torch")
    assert not dispatch.use_triton(torch.zeros(1))
    monkeypatch.setenv(dispatch.BACKEND_ENV, "triton")
    assert dispatch.use_triton(torch.zeros(1))
    monkeypatch.setenv(dispatch.BACKEND_ENV, "cuda")
    with pytest.raises(ValueError, match="ONBOARD_KERNELS='cuda'"):
        dispatch.use_triton(torch.zeros(1))


def _blocks() -> torch.nn.ModuleList:
    torch.manual_seed(0)
    blocks = torch.nn.ModuleList(
        [
            RMSNorm(40, offset=1.0),
            Attention(40, 4, 2, 10, softcap=3.0, qk_norm=QKNormSpec(offset=1.0), sliding_window=3),
            GatedMLP(40, 23, "gelu_pytorch_tanh"),
            GatedMLP(40, 23, "silu"),
            LMHead(40, 50, final_softcap=5.0),
        ]
    )
    with torch.no_grad():
        for p in blocks.parameters():
            p.normal_(0, 0.3)
    return blocks


def _forward(blocks: torch.nn.ModuleList, x: torch.Tensor) -> torch.Tensor:
    norm, attn, geglu_mlp, swiglu_mlp, head = blocks
    rope = RotaryEmbedding(RopeConfig(head_dim=10, partial_rotary_factor=0.6))  # partial: 6 of 10 dims
    cos, sin = rope(torch.arange(x.shape[1])[None])
    h = x + attn(norm(x), cos, sin)
    h = h + geglu_mlp(norm(h)) + swiglu_mlp(norm(h))
    return head(norm(h))


@pytest.mark.skipif(KERNEL_DEVICE != "cpu", reason="CPU tensors through Triton need the interpreter")
def test_blocks_through_triton_kernels_match_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = _blocks()
    x = torch.randn(2, 7, 40, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        monkeypatch.setenv(dispatch.BACKEND_ENV, "torch")
        expected = _forward(blocks, x)
        monkeypatch.setenv(dispatch.BACKEND_ENV, "triton")
        got = _forward(blocks, x)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
