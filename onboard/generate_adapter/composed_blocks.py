"""Blocks composed adapters need that the shared block library (`onboard.blocks`) does not have yet.

- `LearnedPositions`: learned absolute position embeddings added to the token embeddings (GPT-2, GPT-Neo,
  GPT-BigCode). `AdapterModel.forward` adds `model.embed_positions(positions)` when a model has one, with the same
  positions rotary tables get (cache offset and left padding included).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class LearnedPositions(nn.Module):
    """`weight` [max_positions, hidden]; forward(positions [B, S]) -> [B, S, hidden]."""

    def __init__(self, max_positions: int, hidden_size: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(max_positions, hidden_size))

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        return F.embedding(positions, self.weight)
