"""RoPE kernel vs its float64 reference (half-split and interleaved, full and partial rotary), and the reference vs
transformers' apply_rotary_pos_emb of llama (half-split), gpt_neox (partial), glm4 (interleaved partial) and deepseek_v3
(interleaved, de-interleaved output)."""

from __future__ import annotations

import pytest
import torch

from onboard.kernels import dispatch
from onboard.kernels.rope import rope_reference, rope_triton
from tests.kernels.tolerances import DTYPES, assert_close_verbose, dev

# (x shape [..., heads, head_dim], cos shape [..., rotary_dim / 2])
CASES = [
    ((5, 3, 16), (5, 8)),  # full rotary
    ((2, 7, 3, 24), (2, 7, 6)),  # partial rotary (12 of 24), batch dims
    ((2, 5, 4, 20), (5, 5)),  # partial, cos broadcast over batch
    ((9, 1, 38), (9, 19)),  # odd half (19 pairs), single head (MQA key)
]


def _tables(shape: tuple[int, ...], seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    angles = torch.rand(shape, generator=g) * 20
    return angles.cos(), angles.sin()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("interleaved", [False, True], ids=["neox", "interleaved"])
@pytest.mark.parametrize(("x_shape", "cs_shape"), CASES, ids=str)
def test_triton_matches_float64_reference(x_shape, cs_shape, interleaved: bool, dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(x_shape, generator=g).to(dtype)
    cos, sin = _tables(cs_shape, 1)
    out = rope_triton(dev(x), dev(cos), dev(sin), interleaved)
    assert out.dtype == dtype and out.shape == x.shape
    expected = rope_reference(x.double(), cos.double(), sin.double(), interleaved)
    assert_close_verbose(out, expected, dtype)
    rd = 2 * cs_shape[-1]
    assert torch.equal(out[..., rd:].cpu(), x[..., rd:])  # pass-through dims are copied bit for bit


def test_triton_accepts_transposed_heads_view() -> None:
    g = torch.Generator().manual_seed(4)
    x = torch.randn(3, 6, 5, 16, generator=g).transpose(1, 2)  # [B, S, H, D] view of [B, H, S, D]
    cos, sin = _tables((3, 5, 8), 5)
    assert_close_verbose(
        rope_triton(dev(x), dev(cos), dev(sin)), rope_reference(x.double(), cos.double(), sin.double()), torch.float32
    )


def _hf_tables(batch: int, seq: int, rotary_dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """HF's duplicated [B, S, R] cos/sin (emb = cat(freqs, freqs)) for default rope."""
    inv_freq = 1.0 / (10000 ** (torch.arange(0, rotary_dim, 2).float() / rotary_dim))
    pos = torch.arange(seq).float()[None, :, None].expand(batch, -1, -1)
    freqs = pos * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def _ours(x_bhsd: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool = False) -> torch.Tensor:
    half = cos.shape[-1] // 2
    out = rope_reference(x_bhsd.transpose(1, 2), cos[..., :half], sin[..., :half], interleaved)
    return out.transpose(1, 2)


def test_reference_equals_llama_apply_rotary_pos_emb() -> None:
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    q, k = torch.randn(2, 4, 7, 32), torch.randn(2, 2, 7, 32)
    cos, sin = _hf_tables(2, 7, 32)
    hq, hk = apply_rotary_pos_emb(q, k, cos, sin)
    torch.testing.assert_close(_ours(q, cos, sin), hq, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(_ours(k, cos, sin), hk, atol=1e-6, rtol=1e-6)


def test_reference_equals_gpt_neox_partial_rotary() -> None:
    from transformers.models.gpt_neox.modeling_gpt_neox import apply_rotary_pos_emb

    q, k = torch.randn(2, 4, 7, 32), torch.randn(2, 4, 7, 32)
    cos, sin = _hf_tables(2, 7, 8)  # rotary_dim 8 of head_dim 32
    hq, hk = apply_rotary_pos_emb(q, k, cos, sin)
    torch.testing.assert_close(_ours(q, cos, sin), hq, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(_ours(k, cos, sin), hk, atol=1e-6, rtol=1e-6)


def test_reference_equals_glm4_interleaved_partial_rotary() -> None:
    from transformers.models.glm4.modeling_glm4 import apply_rotary_pos_emb

    q, k = torch.randn(2, 4, 7, 32), torch.randn(2, 2, 7, 32)
    cos, sin = _hf_tables(2, 7, 16)
    hq, hk = apply_rotary_pos_emb(q, k, cos, sin)
    torch.testing.assert_close(_ours(q, cos, sin, True), hq, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(_ours(k, cos, sin, True), hk, atol=1e-6, rtol=1e-6)


def test_reference_matches_deepseek_interleave_up_to_its_output_permutation() -> None:
    # DeepSeek's HF port rotates interleaved pairs but writes them de-interleaved ([evens..., odds...]); q.k products
    # are unchanged because q and k get the same permutation.
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import apply_rotary_pos_emb_interleave

    q, k = torch.randn(2, 4, 7, 16), torch.randn(2, 1, 7, 16)
    cos, sin = _hf_tables(2, 7, 16)
    hq, _ = apply_rotary_pos_emb_interleave(q, k, cos, sin)
    ours = _ours(q, cos, sin, True)
    deinterleaved = torch.cat((ours[..., 0::2], ours[..., 1::2]), dim=-1)
    torch.testing.assert_close(deinterleaved, hq, atol=1e-6, rtol=1e-6)


def test_dispatch_uses_reference_on_cpu() -> None:
    x = torch.randn(4, 3, 16)
    cos, sin = _tables((4, 8), 2)
    assert torch.equal(dispatch.rope(x, cos, sin, True), rope_reference(x, cos, sin, True))


def test_rotary_dim_larger_than_head_dim_rejected() -> None:
    cos, sin = _tables((4, 9), 2)
    with pytest.raises(ValueError, match="rotary dim 18 exceeds head_dim 16"):
        rope_triton(dev(torch.randn(4, 3, 16)), dev(cos), dev(sin))
