"""Blocks generated adapters need that the shared block library (`onboard.blocks`) lacks: learned and sinusoidal
absolute positions, MLA's latent-norm eps, a transform before the LM head, and Gemma 4's per-layer embeddings.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from onboard.blocks.embeddings import Embedding
from onboard.blocks.mlp import ACTIVATIONS

# transformers' MLA families (DeepSeek V2 / V3 / V3.2, GLM-4-MoE-Lite, GLM-MoE-DSA, Youtu, MiniCPM3) build the latent
# norms with the RMSNorm default eps, whatever config.rms_norm_eps says (GLM-4-MoE-Lite: 1e-5 there).
MLA_LATENT_NORM_EPS = 1e-6


class LearnedPositions(nn.Module):
    """`weight` [max_positions + offset, hidden]; forward(positions [B, S]) -> [B, S, hidden]. `offset`: rows before
    position 0 (OPT and BioGPT look position p up at row p + 2)."""

    def __init__(self, max_positions: int, hidden_size: int, offset: int = 0) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(max_positions + offset, hidden_size))
        self.offset = offset

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        return F.embedding(positions + self.offset if self.offset else positions, self.weight)


class SinusoidalPositions(nn.Module):
    """fairseq / tensor2tensor sinusoidal positions, as XGLM computes them: row p + `offset` of a table whose first
    half of the columns is sin(p / 10000^(j / (half - 1))) and second half the cosines (a zero column when `hidden` is
    odd), the `padding_idx` row zeroed. No parameter: computed in float32 for the positions asked for."""

    def __init__(self, hidden_size: int, offset: int = 2, padding_idx: int | None = None) -> None:
        super().__init__()
        self.hidden_size, self.offset, self.padding_idx = hidden_size, offset, padding_idx

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        half = self.hidden_size // 2
        rows = (positions + self.offset).float()
        freq = torch.exp(
            torch.arange(half, dtype=torch.float32, device=positions.device) * -(math.log(10000) / (half - 1))
        )
        angles = rows[..., None] * freq
        out = torch.cat((torch.sin(angles), torch.cos(angles)), dim=-1)
        if self.hidden_size % 2:
            out = F.pad(out, (0, 1))
        if self.padding_idx is not None:
            out = out.masked_fill((positions + self.offset == self.padding_idx)[..., None], 0.0)
        return out


class PerLayerInputs(nn.Module):
    """[B, S, layers, dim] from the token ids and the (scaled) token embeddings, as Gemma 4's
    get_per_layer_inputs + project_per_layer_inputs: (norm(projection(embeddings) / sqrt(hidden)) + embed(ids)) /
    sqrt(2), `embed` a [vocab, layers * dim] table scaled by sqrt(dim), `norm` the family's norm over dim."""

    def __init__(self, vocab_size: int, hidden_size: int, layers: int, dim: int, norm: nn.Module) -> None:
        super().__init__()
        self.embed = Embedding(vocab_size, layers * dim, scale=dim**0.5)
        self.projection = nn.Linear(hidden_size, layers * dim, bias=False)
        self.norm = norm
        self.layers, self.dim, self.hidden_size = layers, dim, hidden_size

    def forward(self, input_ids: torch.Tensor, embeddings: torch.Tensor) -> torch.Tensor:
        shape = (*embeddings.shape[:-1], self.layers, self.dim)
        projected = self.norm((self.projection(embeddings) * self.hidden_size**-0.5).reshape(shape))
        return (projected + self.embed(input_ids).reshape(shape)) * 2**-0.5


class PerLayerGate(nn.Module):
    """A layer's use of its per-layer input: norm(projection(act(gate(x)) * layer_input)), added to the residual by
    the layer (Gemma 4's per_layer_input_gate, per_layer_projection, post_per_layer_input_norm)."""

    def __init__(self, hidden_size: int, dim: int, activation: str, norm: nn.Module) -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"PerLayerGate: activation {activation!r} is not one of {sorted(ACTIVATIONS)}")
        self.gate = nn.Linear(hidden_size, dim, bias=False)
        self.projection = nn.Linear(dim, hidden_size, bias=False)
        self.norm = norm
        self.act = ACTIVATIONS[activation]

    def forward(self, x: torch.Tensor, layer_input: torch.Tensor | None) -> torch.Tensor:
        if layer_input is None:
            raise ValueError("PerLayerGate: no per-layer input for this layer (ctx.layer_input)")
        return self.norm(self.projection(self.act(self.gate(x)) * layer_input))


class HeadTransform(nn.Module):
    """norm(act(dense(x))) before the LM head's projection (ModernBertDecoderPredictionHead)."""

    def __init__(self, hidden_size: int, activation: str, norm: nn.Module, bias: bool = False) -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"HeadTransform: activation {activation!r} is not one of {sorted(ACTIVATIONS)}")
        self.dense = nn.Linear(hidden_size, hidden_size, bias=bias)
        self.act = ACTIVATIONS[activation]
        self.norm = norm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.act(self.dense(x)))
