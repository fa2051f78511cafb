"""Gated short convolution, a token mixer in place of attention on some layers (LFM2's `conv` layers): `in_proj`
gives B, C and x; y = C * causal_depthwise_conv(B * x); `out_proj`. Decoding carries the previous `kernel - 1`
inputs (`LayerKV.conv_state`) instead of keys and values.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .attention import AttentionContext


class ShortConv(nn.Module):
    """forward(x [B, S, hidden], cos, sin, ctx) -> [B, S, hidden], the signature of Attention (cos / sin unused)."""

    def __init__(self, hidden_size: int, kernel: int, bias: bool = False) -> None:
        super().__init__()
        self.kernel = kernel
        self.in_proj = nn.Linear(hidden_size, 3 * hidden_size, bias=bias)
        self.conv = nn.Conv1d(hidden_size, hidden_size, kernel, groups=hidden_size, bias=bias, padding=kernel - 1)
        self.out_proj = nn.Linear(hidden_size, hidden_size, bias=bias)

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor | None, sin: torch.Tensor | None, ctx: AttentionContext | None = None
    ) -> torch.Tensor:
        ctx = ctx or AttentionContext()
        s = x.shape[1]
        if ctx.key_mask is not None:  # padding tokens zeroed first: the convolution would carry them into real ones
            x = (x * ctx.key_mask[:, -s:, None]).to(x.dtype)
        b, c, h = self.in_proj(x).transpose(-1, -2).chunk(3, dim=-2)
        conv = causal_conv(b * h, self.conv, ctx)  # [B, hidden, S]
        return self.out_proj((c * conv).transpose(-1, -2))


def causal_conv(x: torch.Tensor, conv: nn.Conv1d, ctx: AttentionContext) -> torch.Tensor:
    """Depthwise `conv` over x [B, channels, S], causal: each output sees its own and the previous kernel - 1 inputs
    (zeros before the first token, or `ctx.cache.conv_state`, updated, when decoding)."""
    kernel = conv.weight.shape[-1]
    before = ctx.cache.conv_state if ctx.cache is not None else None
    if before is None:
        before = x.new_zeros(*x.shape[:2], kernel - 1)
    window = torch.cat((before, x), dim=-1)
    if ctx.cache is not None:
        ctx.cache.conv_state = window[..., -(kernel - 1) :]
    return F.conv1d(window, conv.weight, conv.bias, groups=x.shape[1])
