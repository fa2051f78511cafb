"""Short-convolution mixer vs transformers' Lfm2ShortConv with the same weights (float32): a full prefix, a
left-padded batch (padding zeroed before the convolution, so it never reaches real tokens), and decoding token by
token with the convolution state cached, against the whole sequence at once."""

from __future__ import annotations

import torch

from onboard.blocks.attention import AttentionContext, LayerKV
from onboard.blocks.conv import ShortConv
from tests.blocks._hf import randomize

B, S, HIDDEN, KERNEL = 2, 9, 32, 3


def _pair(bias: bool) -> tuple[ShortConv, torch.nn.Module]:
    from transformers import Lfm2Config
    from transformers.models.lfm2.modeling_lfm2 import Lfm2ShortConv

    cfg = Lfm2Config(hidden_size=HIDDEN, conv_L_cache=KERNEL, conv_bias=bias, num_hidden_layers=1,
                     layer_types=["conv"])  # fmt: skip
    hf = Lfm2ShortConv(cfg, 0).eval()
    randomize(hf)
    ours = ShortConv(HIDDEN, KERNEL, bias=bias)
    ours.load_state_dict(hf.state_dict(), strict=True)  # the checkpoint's names
    return ours, hf


def _x() -> torch.Tensor:
    return torch.randn(B, S, HIDDEN, generator=torch.Generator().manual_seed(2))


def test_short_conv_equals_lfm2() -> None:
    for bias in (False, True):
        ours, hf = _pair(bias)
        with torch.no_grad():
            torch.testing.assert_close(ours(_x(), None, None), hf(_x()), atol=1e-5, rtol=1e-5)


def test_padding_never_reaches_real_tokens() -> None:
    """Row 1 left-padded by 4 tokens equals its 5 real tokens alone; with the padding left in, it does not."""
    ours, _ = _pair(False)
    x = _x()
    mask = torch.ones(B, S, dtype=torch.bool)
    mask[1, :4] = False
    with torch.no_grad():
        padded = ours(x, None, None, AttentionContext(key_mask=mask))[1, 4:]
        alone = ours(x[1:, 4:], None, None)[0]
        unmasked = ours(x, None, None)[1, 4:]
    torch.testing.assert_close(padded, alone, atol=1e-6, rtol=1e-6)
    assert (unmasked - alone).abs().max() > 1e-3


def test_cached_decoding_equals_the_whole_sequence() -> None:
    ours, _ = _pair(True)
    x = _x()
    cache = LayerKV()
    with torch.no_grad():
        steps = [ours(x[:, :4], None, None, AttentionContext(cache=cache))]
        steps += [ours(x[:, t : t + 1], None, None, AttentionContext(cache=cache)) for t in range(4, S)]
        whole = ours(x, None, None)
    torch.testing.assert_close(torch.cat(steps, dim=1), whole, atol=1e-6, rtol=1e-6)
    assert cache.conv_state.shape == (B, HIDDEN, KERNEL - 1)
