"""Feed-forward blocks: gated (SwiGLU, GeGLU tanh / exact, relu²) with a fused `gate_up_proj`, and plain two-layer
MLPs (GELU, GELU-tanh, relu², SiLU)."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from onboard.blocks.norms import RMSNorm
from onboard.kernels import dispatch

# Gated activations: name -> f(gate, up). Names follow HF's `hidden_act` values.
GATED_ACTIVATIONS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "silu": dispatch.swiglu,
    "swish": dispatch.swiglu,
    "gelu_pytorch_tanh": lambda g, u: dispatch.geglu(g, u, "tanh"),
    "gelu_tanh": lambda g, u: dispatch.geglu(g, u, "tanh"),
    "gelu_new": lambda g, u: dispatch.geglu(g, u, "tanh"),
    "gelu": lambda g, u: dispatch.geglu(g, u, "none"),
    "relu2": lambda g, u: torch.square(F.relu(g)) * u,  # BitNet b1.58
}

# Plain activations for non-gated MLPs.
ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "gelu": F.gelu,
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "relu2": lambda x: torch.square(F.relu(x)),
    "silu": F.silu,
    "relu": F.relu,
}


def activation_fn(table: dict, name: str, what: str) -> Callable:
    fn = table.get(name)
    if fn is None:
        raise ValueError(f"unsupported {what} activation {name!r}; supported: {sorted(table)}")
    return fn


class GatedMLP(nn.Module):
    """down_proj(act(gate) * up) with one fused `gate_up_proj` ([gate; up] rows, each `intermediate_size`).
    `sub_norm_eps`: an RMSNorm `sub_norm` over the intermediate values before down_proj (BitNet's ffn_sub_norm).
    `multipliers` (gate, down): the gate scaled before the activation, the output after down_proj (Falcon-H1)."""

    def __init__(
        self,
        hidden_size: int,
        intermediate_size: int,
        activation: str = "silu",
        bias: bool = False,
        sub_norm_eps: float | None = None,
        multipliers: tuple[float, float] | list[float] | None = None,
    ) -> None:
        super().__init__()
        self.act = activation_fn(GATED_ACTIVATIONS, activation, "gated")
        # Falcon-H1's muP: the gate scaled before the activation, the output after down_proj (None: both 1)
        self.multipliers = (float(multipliers[0]), float(multipliers[1])) if multipliers is not None else None
        self.gate_up_proj = nn.Linear(hidden_size, 2 * intermediate_size, bias=bias)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=bias)
        self.sub_norm = RMSNorm(intermediate_size, sub_norm_eps) if sub_norm_eps is not None else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        if self.multipliers is not None:
            gate = gate * self.multipliers[0]
        inner = self.act(gate, up)
        out = self.down_proj(self.sub_norm(inner) if self.sub_norm is not None else inner)
        return out * self.multipliers[1] if self.multipliers is not None else out


class MLP(nn.Module):
    """down_proj(act(up_proj(x))): starcoder2 / gpt-bigcode (GELU-tanh), nemotron (relu²), phi (GELU)."""

    def __init__(self, hidden_size: int, intermediate_size: int, activation: str = "gelu", bias: bool = True) -> None:
        super().__init__()
        self.act = activation_fn(ACTIVATIONS, activation, "MLP")
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=bias)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act(self.up_proj(x)))
