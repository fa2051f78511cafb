"""Normalisation blocks: RMSNorm (with (offset + w) weight), LayerNorm, and QK-norm on attention heads."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from onboard.kernels import dispatch


class RMSNorm(nn.Module):
    """RMSNorm over the last dim. `offset=1.0` is Gemma's (1 + w) (weight initialised to 0); `casting` follows
    `onboard.kernels.rmsnorm` ("llama" for offset 0 by default, "gemma" otherwise). `weight=False`: no weight at all
    (NanoChat's norms)."""

    def __init__(
        self, dim: int, eps: float = 1e-6, offset: float = 0.0, casting: str | None = None, weight: bool = True
    ) -> None:
        super().__init__()
        if not weight and offset:
            raise ValueError("RMSNorm(weight=False) has no offset")
        self.weight = nn.Parameter(torch.zeros(dim) if offset else torch.ones(dim)) if weight else None
        self.eps = eps
        self.offset = offset
        self.casting = casting

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.weight is None:
            return rms_normalize(x, self.eps)
        return dispatch.rms_norm(x, self.weight, self.eps, self.offset, self.casting)

    def extra_repr(self) -> str:
        shape = tuple(self.weight.shape) if self.weight is not None else "no weight"
        return f"{shape}, eps={self.eps}, offset={self.offset}"


def rms_normalize(x: torch.Tensor, eps: float) -> torch.Tensor:
    """x / rms(x) over the last dim in float32, back in x's dtype: an RMSNorm without weight."""
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


class LayerNorm(nn.Module):
    """LayerNorm over the last dim computed in float32 (like Cohere's), optional bias. The weight may have extra
    leading dims that broadcast over the input (Cohere's per-head QK-norm weight is [heads, head_dim]). `offset=1.0`
    is Nemotron's LayerNorm1P: the weight applied as (1 + w), initialised to 0. `weight=False`: no weight and no bias
    at all (OLMo's OlmoLayerNorm)."""

    def __init__(
        self,
        shape: int | tuple[int, ...],
        eps: float = 1e-5,
        bias: bool = True,
        offset: float = 0.0,
        weight: bool = True,
    ) -> None:
        super().__init__()
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        if not weight and (bias or offset):
            raise ValueError("LayerNorm(weight=False) has no bias and no offset")
        self.weight = nn.Parameter(torch.zeros(shape) if offset else torch.ones(shape)) if weight else None
        self.bias = nn.Parameter(torch.zeros(shape)) if bias else None
        self.eps = eps
        self.offset = offset

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return layer_norm(x, self.weight, self.bias, self.eps, self.offset)


def layer_norm(
    x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, eps: float, offset: float = 0.0
) -> torch.Tensor:
    """LayerNorm over the last dim in float32; weight/bias may broadcast (e.g. [heads, head_dim]). An offset is
    added in the weight's own dtype, as NemotronLayerNorm1P does (`self.weight + 1.0`: in bfloat16 that sum rounds).
    No weight: the normalised values themselves."""
    y = F.layer_norm(x.float(), (x.shape[-1],), None, None, eps)
    if weight is not None:
        y = y * (weight + offset if offset else weight).float()
    if bias is not None:
        y = y + bias.float()
    return y.to(x.dtype)


# Where a QK-norm's statistics and weight live.
QK_NORM_SCOPES = ("head", "per_head_weight", "all")


@dataclass(frozen=True)
class QKNormSpec:
    """How an attention block normalises q and k heads (see QKNorm); kind "rms" or "layer"."""

    eps: float = 1e-6
    kind: str = "rms"
    offset: float = 0.0
    scope: str = "head"
    casting: str | None = None  # RMS only; OLMo2 multiplies in float32 at offset 0: "gemma"
    bias: bool = False  # LayerNorm only (Persimmon's q_layernorm / k_layernorm)
    weight: bool = True  # False: RMS without weight (NanoChat's q_norm / k_norm)


class QKNorm(nn.Module):
    """Norm applied to query or key heads x [..., H, D] before RoPE (after it: Attention(qk_norm_after_rope=True)).

    scope "head": normalise each head over D with one shared [D] weight (qwen3, gemma3, ...);
    "per_head_weight": normalise over D with a [H, D] weight (cohere, LayerNorm);
    "all": normalise over the flattened H*D with a [H*D] weight (olmo2, olmoe).
    `bias` (kind "layer" only): a bias of the weight's shape (persimmon). `weight=False` (kind "rms"): no weight
    (nanochat).
    """

    def __init__(
        self,
        num_heads: int,
        head_dim: int,
        eps: float = 1e-6,
        kind: str = "rms",
        offset: float = 0.0,
        scope: str = "head",
        casting: str | None = None,
        bias: bool = False,
        weight: bool = True,
    ) -> None:
        super().__init__()
        if not weight and (kind != "rms" or offset or bias):
            raise ValueError("QKNorm(weight=False) is an RMS norm without offset or bias")
        if scope not in QK_NORM_SCOPES:
            raise ValueError(f"QKNorm scope must be one of {QK_NORM_SCOPES}, got {scope!r}")
        if kind not in ("rms", "layer"):
            raise ValueError(f"QKNorm kind must be 'rms' or 'layer', got {kind!r}")
        if kind == "rms" and scope == "per_head_weight":
            raise ValueError("QKNorm: RMS with per-head weights is not a known architecture; use scope 'head'")
        if kind == "rms" and bias:
            raise ValueError("QKNorm: an RMS norm has no bias; a biased QK-norm is kind 'layer'")
        self.scope, self.kind, self.eps, self.offset, self.casting = scope, kind, eps, offset, casting
        shape = {"head": (head_dim,), "per_head_weight": (num_heads, head_dim), "all": (num_heads * head_dim,)}[scope]
        self.weight = nn.Parameter(torch.zeros(shape) if offset else torch.ones(shape)) if weight else None
        self.bias = nn.Parameter(torch.zeros(shape)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.flatten(-2) if self.scope == "all" else x
        if self.weight is None:
            y = rms_normalize(x2, self.eps)
        elif self.kind == "rms":
            y = dispatch.rms_norm(x2, self.weight, self.eps, self.offset, self.casting)
        else:
            y = layer_norm(x2, self.weight, self.bias, self.eps)
        return y.view(x.shape)
