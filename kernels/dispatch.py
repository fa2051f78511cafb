"""One entry point per op: the Triton kernel for CUDA tensors, the PyTorch reference otherwise.

Blocks call these so one model definition runs fast on GPU and exactly (and debuggably) on CPU. `ONBOARD_KERNELS`
(read at each call, so tests can flip it): "auto" (default), "torch" (reference everywhere: bisecting a parity gap
on GPU), "triton" (Triton everywhere: on CPU only useful under TRITON_INTERPRET=1, to test whole blocks through the
kernels). The Triton paths are inference-only (no autograd).
"""

from __future__ import annotations

import os

import torch

from . import geglu as _geglu
from . import rmsnorm as _rmsnorm
from . import rope as _rope
from . import softcap as _softcap
from . import swiglu as _swiglu

BACKEND_ENV = "ONBOARD_KERNELS"


BACKENDS = ("auto", "torch", "triton")


def use_triton(x: torch.Tensor) -> bool:
    """True when `x` lives on a CUDA device (or the Triton path is forced) and the reference is not forced."""
    backend = os.environ.get(BACKEND_ENV, "auto")
    if backend not in BACKENDS:
        raise ValueError(f"{BACKEND_ENV}={backend!r} is not one of {BACKENDS}")
    return backend == "triton" or (x.is_cuda and backend == "auto")


def rms_norm(
    x: torch.Tensor, weight: torch.Tensor, eps: float, offset: float = 0.0, casting: str | None = None
) -> torch.Tensor:
    """RMSNorm over the last dim with weight (offset + w); casting "llama" (default for offset 0) or "gemma"."""
    fn = _rmsnorm.rms_norm_triton if use_triton(x) else _rmsnorm.rms_norm_reference
    return fn(x, weight, eps, offset, casting)


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool = False) -> torch.Tensor:
    """Rotary embedding of x [..., H, D] with half tables cos/sin [..., R/2]; dims past R pass through."""
    fn = _rope.rope_triton if use_triton(x) else _rope.rope_reference
    return fn(x, cos, sin, interleaved)


def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up."""
    fn = _swiglu.swiglu_triton if use_triton(gate) else _swiglu.swiglu_reference
    return fn(gate, up)


def geglu(gate: torch.Tensor, up: torch.Tensor, approximate: str = "tanh") -> torch.Tensor:
    """gelu(gate) * up; approximate "tanh" (gelu_pytorch_tanh) or "none" (exact erf)."""
    fn = _geglu.geglu_triton if use_triton(gate) else _geglu.geglu_reference
    return fn(gate, up, approximate)


def softcap(x: torch.Tensor, cap: float) -> torch.Tensor:
    """cap * tanh(x / cap)."""
    fn = _softcap.softcap_triton if use_triton(x) else _softcap.softcap_reference
    return fn(x, cap)
