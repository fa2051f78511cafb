"""Blocks the shared block library (`onboard.blocks`) does not have yet, used by generated adapters, each written
from the reference implementation's math and checked by parity: gpt-oss's MoE, PhiMoE's sparsemixer routing,
Apertus' xIELU MLP, Gemma 4's experts beside the dense MLP.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from onboard.blocks.mlp import GatedMLP
from onboard.blocks.moe import MoE
from onboard.blocks.norms import rms_normalize


def run_experts(
    tokens: torch.Tensor, weights: torch.Tensor, indices: torch.Tensor, expert_fn: Callable
) -> torch.Tensor:
    """Sum over each token's chosen experts of weight * expert_fn(e, rows); loops over the experts that were hit."""
    out = torch.zeros_like(tokens)
    for expert in indices.unique().tolist():
        token_idx, slot = torch.where(indices == expert)
        y = expert_fn(expert, tokens[token_idx])
        # token_idx is unique within one expert (a token picks an expert once), so an indexed += is exact
        out[token_idx] += (y * weights[token_idx, slot, None]).to(out.dtype)
    return out


def gated_expert(block: nn.Module, e: int, h: torch.Tensor) -> torch.Tensor:
    """Expert e of stacked gated experts (`experts_gate_up` [E, 2I, H], `experts_down` [E, H, I]) on rows h."""
    gate, up = F.linear(h, block.experts_gate_up[e]).chunk(2, dim=-1)
    return F.linear(block.act(gate, up), block.experts_down[e])


class GptOssMoE(nn.Module):
    """gpt-oss MoE. Parameters keep the checkpoint's names and layouts: `router` (Linear with bias),
    `experts.gate_up_proj` [E, hidden, 2I] (gate at even, up at odd columns), `experts.gate_up_proj_bias` [E, 2I],
    `experts.down_proj` [E, I, hidden], `experts.down_proj_bias` [E, hidden]."""

    def __init__(
        self, hidden_size: int, num_experts: int, intermediate_size: int, top_k: int, alpha: float, limit: float
    ) -> None:
        super().__init__()
        self.top_k, self.alpha, self.limit = top_k, alpha, limit
        self.router = nn.Linear(hidden_size, num_experts, bias=True)
        self.experts = nn.Module()
        self.experts.gate_up_proj = nn.Parameter(torch.zeros(num_experts, hidden_size, 2 * intermediate_size))
        self.experts.gate_up_proj_bias = nn.Parameter(torch.zeros(num_experts, 2 * intermediate_size))
        self.experts.down_proj = nn.Parameter(torch.zeros(num_experts, intermediate_size, hidden_size))
        self.experts.down_proj_bias = nn.Parameter(torch.zeros(num_experts, hidden_size))

    def _expert(self, e: int, h: torch.Tensor) -> torch.Tensor:
        ex = self.experts
        gate_up = h @ ex.gate_up_proj[e] + ex.gate_up_proj_bias[e]
        gate = gate_up[..., ::2].clamp(max=self.limit)
        up = gate_up[..., 1::2].clamp(min=-self.limit, max=self.limit)
        return ((up + 1) * gate * torch.sigmoid(gate * self.alpha)) @ ex.down_proj[e] + ex.down_proj_bias[e]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = x.reshape(-1, x.shape[-1])
        top, indices = self.router(tokens).topk(self.top_k, dim=-1)
        weights = torch.softmax(top, dim=-1)
        return run_experts(tokens, weights, indices, self._expert).view(x.shape)


def sparsemixer_top2(scores: torch.Tensor, jitter_eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """PhiMoE inference routing: pick the best expert, weight it by a softmax over the experts within a relative
    `2 * jitter_eps` of it; then the same for the best of the rest. Returns (weights [T, 2], indices [T, 2])."""
    picks, weights = [], []
    masked = scores
    for _ in range(2):
        top, idx = masked.max(dim=-1, keepdim=True)
        factor = scores.abs().clamp(min=top)
        gates = masked.masked_fill((top - scores) / factor > 2 * jitter_eps, float("-inf"))
        weights.append(torch.softmax(gates, dim=-1).gather(-1, idx))
        picks.append(idx)
        masked = torch.scatter(masked, -1, idx, float("-inf"))
    return torch.cat(weights, dim=-1), torch.cat(picks, dim=-1)


class SparseMixerMoE(MoE):
    """MoE block (same parameters as `onboard.blocks.moe.MoE`) with PhiMoE's sparsemixer top-2 routing."""

    def __init__(self, hidden_size: int, num_experts: int, intermediate_size: int, jitter_eps: float, **kw) -> None:
        from onboard.blocks.moe import RouterSpec

        super().__init__(hidden_size, num_experts, intermediate_size, RouterSpec(top_k=2), **kw)
        self.jitter_eps = jitter_eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = x.reshape(-1, x.shape[-1])
        weights, indices = sparsemixer_top2(self.router_logits(tokens), self.jitter_eps)
        return run_experts(tokens, weights, indices, partial(gated_expert, self)).view(x.shape)


class XIELU(nn.Module):
    """xIELU activation (Apertus): learned alpha_p / alpha_n (softplus-parametrised), fixed beta and eps buffers
    (stored in checkpoints, so they are persistent buffers here)."""

    def __init__(self) -> None:
        super().__init__()
        self.alpha_p = nn.Parameter(torch.zeros(1))
        self.alpha_n = nn.Parameter(torch.zeros(1))
        self.register_buffer("beta", torch.tensor(0.5))
        self.register_buffer("eps", torch.tensor(-1e-6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        alpha_p = F.softplus(self.alpha_p)
        alpha_n = self.beta + F.softplus(self.alpha_n)
        neg = (torch.expm1(torch.min(x, self.eps)) - x) * alpha_n + self.beta * x
        return torch.where(x > 0, alpha_p * x * x + self.beta * x, neg)


class XIELUMLP(nn.Module):
    """down_proj(xielu(up_proj(x))) with no biases (Apertus)."""

    def __init__(self, hidden_size: int, intermediate_size: int, bias: bool = False) -> None:
        super().__init__()
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=bias)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=bias)
        self.act_fn = XIELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act_fn(self.up_proj(x)))


class DenseBesideMoE(GatedMLP):
    """Gemma 4's feed-forward slot with `enable_moe_block`: post_dense_norm(mlp(h)) + post_moe_norm(experts(
    pre_moe_norm(x))), h the normed input, x the residual. The router (Gemma4TextRouter) reads x normalised without a
    weight, times `router_scale` / sqrt(hidden): float32 softmax, top-k, renormalised, times `per_expert_scale`."""

    def __init__(
        self,
        hidden_size: int,
        intermediate_size: int,
        moe_intermediate_size: int,
        num_experts: int,
        top_k: int,
        activation: str,
        norms: tuple[nn.Module, nn.Module, nn.Module],
        eps: float,
    ) -> None:
        super().__init__(hidden_size, intermediate_size, activation)
        self.top_k, self.eps, self.hidden_size = top_k, eps, hidden_size
        self.router = nn.Linear(hidden_size, num_experts, bias=False)
        self.router_scale = nn.Parameter(torch.ones(hidden_size))
        self.per_expert_scale = nn.Parameter(torch.ones(num_experts))
        self.experts_gate_up = nn.Parameter(torch.zeros(num_experts, 2 * moe_intermediate_size, hidden_size))
        self.experts_down = nn.Parameter(torch.zeros(num_experts, hidden_size, moe_intermediate_size))
        self.post_dense_norm, self.pre_moe_norm, self.post_moe_norm = norms

    def forward(self, h: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        if residual is None:
            raise ValueError("DenseBesideMoE: the experts read the layer's residual (the layer passes it)")
        dense = self.post_dense_norm(super().forward(h))
        tokens = residual.reshape(-1, residual.shape[-1])
        scores = self.router(rms_normalize(tokens, self.eps) * self.router_scale * self.hidden_size**-0.5)
        weights, indices = torch.softmax(scores, dim=-1, dtype=torch.float32).topk(self.top_k, dim=-1)
        weights = weights / weights.sum(dim=-1, keepdim=True) * self.per_expert_scale[indices]
        routed = run_experts(self.pre_moe_norm(tokens), weights, indices, partial(gated_expert, self))
        return dense + self.post_moe_norm(routed.view(residual.shape))
