"""Token embedding (with Gemma's sqrt(hidden) scale) and the LM head (tied or not, logit scaling, final
soft-capping)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from onboard.kernels import dispatch


class Embedding(nn.Module):
    """Token embedding; `scale` multiplies the output (Gemma: hidden_size ** 0.5, rounded to the activation dtype
    first, as HF does)."""

    def __init__(self, vocab_size: int, hidden_size: int, scale: float | None = None) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(vocab_size, hidden_size))
        self.scale = scale

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        x = F.embedding(input_ids, self.weight)
        if self.scale is not None:
            x = x * torch.tensor(self.scale).to(x.dtype)  # float32 first, then the weight dtype, like HF
        return x


class LMHead(nn.Module):
    """float32 logits = softcap(scale * (x @ W^T + b)). `tied_to` shares the embedding's weight Parameter;
    `transform` runs on x first (ModernBERT's prediction head)."""

    def __init__(
        self,
        hidden_size: int,
        vocab_size: int,
        *,
        bias: bool = False,
        scale: float | None = None,
        final_softcap: float | None = None,
        tied_to: Embedding | None = None,
        transform: nn.Module | None = None,
    ) -> None:
        super().__init__()
        self.transform = transform
        if tied_to is not None:
            if tuple(tied_to.weight.shape) != (vocab_size, hidden_size):
                raise ValueError(
                    f"tied embedding has shape {tuple(tied_to.weight.shape)}, expected ({vocab_size}, {hidden_size})"
                )
            self.weight = tied_to.weight
        else:
            self.weight = nn.Parameter(torch.zeros(vocab_size, hidden_size))
        self.bias = nn.Parameter(torch.zeros(vocab_size)) if bias else None
        self.scale, self.final_softcap = scale, final_softcap

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.transform is not None:
            x = self.transform(x)
        # In the weights' dtype, as transformers' heads cast it: a float32 residual stream (Mamba-2) reaches here.
        logits = F.linear(x.to(self.weight.dtype), self.weight, self.bias)
        if self.scale is not None:
            logits = logits * self.scale
        logits = logits.float()
        if self.final_softcap is not None:
            logits = dispatch.softcap(logits, self.final_softcap)
        return logits
