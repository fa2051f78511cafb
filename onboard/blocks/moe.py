"""Mixture-of-experts feed-forward: routing (softmax or sigmoid scores, group-limited selection, a correction bias
that affects only *which* experts are chosen, top-k normalisation, scaling), stacked experts ([gate; up] rows, or
`gated=False`: Nemotron-H's down(act(up(x)))) and optional shared experts (with qwen2_moe's sigmoid gate).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .mlp import ACTIVATIONS, GATED_ACTIVATIONS, MLP, GatedMLP, activation_fn
from .norms import RMSNorm


@dataclass(frozen=True)
class RouterSpec:
    """How tokens pick experts; scoring "softmax" (Mixtral, Qwen) or "sigmoid" (DeepSeek V3, GLM-4 MoE)."""

    top_k: int
    scoring: str = "softmax"
    norm_topk_prob: bool = True
    routed_scaling_factor: float = 1.0
    correction_bias: bool = False
    n_group: int = 1
    topk_group: int = 1
    group_score: str = "top2_sum"
    """How group-limited routing ranks a group: "top2_sum" (DeepSeek-V3) or "max" (DeepSeek-V2)."""
    select_by: str = "scores"
    """What the top-k (plus any correction bias) ranks: "scores", or "logits" (Kolibri; the weights stay scores)."""
    norm_min: float = 0.0
    """With norm_topk_prob: the weights' sum is clamped to at least this before dividing (ERNIE MoE's moe_norm_min)."""
    logit_softcap: float = 0.0
    """Router logits -> cap * tanh(logits / cap) before scoring (Laguna); 0: none."""
    logits_in_float32: bool = False
    """Router logits from float32 activations and weight (DeepSeek V2/V3, GLM-4 MoE, ERNIE MoE); False: in the
    activation dtype, then scored in float32 (Mixtral, Qwen MoE, OLMoE, gpt-oss). Rounding where the family's
    reference does keeps near-tie expert choices the same in bf16."""


def route(logits: torch.Tensor, spec: RouterSpec, bias: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Router logits [T, E] (float32) -> (weights [T, k] float32, expert indices [T, k])."""
    if spec.logit_softcap > 0.0:
        logits = torch.tanh(logits / spec.logit_softcap) * spec.logit_softcap
    if spec.scoring == "softmax":
        scores = torch.softmax(logits, dim=-1)
    elif spec.scoring == "sigmoid":
        scores = torch.sigmoid(logits)
    else:
        raise ValueError(f"unknown router scoring {spec.scoring!r}; use 'softmax' or 'sigmoid'")
    ranked = logits if spec.select_by == "logits" else scores
    choice = ranked + bias if bias is not None else ranked
    if spec.n_group > 1:
        # Group-limited routing: only the topk_group best-ranked groups' experts can be chosen
        t, e = choice.shape
        grouped = choice.view(t, spec.n_group, e // spec.n_group)
        if spec.group_score == "max":
            group_scores = grouped.amax(dim=-1)
        else:
            group_scores = grouped.topk(2, dim=-1).values.sum(dim=-1)
        keep = torch.zeros_like(group_scores, dtype=torch.bool)
        keep.scatter_(1, group_scores.topk(spec.topk_group, dim=-1).indices, True)
        choice = grouped.masked_fill(~keep[..., None], float("-inf")).view(t, e)
    indices = choice.topk(spec.top_k, dim=-1).indices
    weights = scores.gather(1, indices)  # the correction bias never reaches the weights
    if spec.norm_topk_prob and spec.norm_min:
        weights = weights / weights.sum(dim=-1, keepdim=True).clamp(min=spec.norm_min)
    elif spec.norm_topk_prob:
        weights = weights / (weights.sum(dim=-1, keepdim=True) + (1e-20 if spec.scoring == "sigmoid" else 0.0))
    return weights * spec.routed_scaling_factor, indices


class MoE(nn.Module):
    """Sparse MoE block: forward(x [..., hidden]) -> [..., hidden]. `shared_average`: (routed + shared) / 2 (Cohere2-
    MoE). `output_norm_eps`: an RMSNorm on the block's output (A.X-K1). `weights_on_input`: each expert reads its
    routing weight times the token, its output summed unweighted (Llama 4)."""

    def __init__(
        self,
        hidden_size: int,
        num_experts: int,
        moe_intermediate_size: int,
        router: RouterSpec,
        *,
        activation: str = "silu",
        shared_intermediate_size: int = 0,
        shared_gate: bool = False,
        shared_average: bool = False,
        output_norm_eps: float | None = None,
        gated: bool = True,
        weights_on_input: bool = False,
    ) -> None:
        super().__init__()
        self.shared_average = shared_average
        self.weights_on_input = weights_on_input
        if router.n_group > 1 and num_experts % router.n_group:
            raise ValueError(f"num_experts {num_experts} is not divisible by n_group {router.n_group}")
        self.spec = router
        self.num_experts = num_experts
        self.gated = gated
        self.act = activation_fn(
            GATED_ACTIVATIONS if gated else ACTIVATIONS, activation, f"MoE {'gated' if gated else 'plain'}"
        )
        # Router weight and correction bias stay float32 whatever the model's dtype, as transformers keeps them:
        # rounding them to bf16 flips experts on near-ties.
        self.router = nn.Linear(hidden_size, num_experts, bias=False, dtype=torch.float32)
        self.e_score_correction_bias = (
            nn.Parameter(torch.zeros(num_experts, dtype=torch.float32)) if router.correction_bias else None
        )
        if gated:
            self.experts_gate_up = nn.Parameter(torch.zeros(num_experts, 2 * moe_intermediate_size, hidden_size))
        else:
            self.experts_up = nn.Parameter(torch.zeros(num_experts, moe_intermediate_size, hidden_size))
        self.experts_down = nn.Parameter(torch.zeros(num_experts, hidden_size, moe_intermediate_size))
        self.shared: nn.Module | None = None
        if shared_intermediate_size:
            self.shared = (
                GatedMLP(hidden_size, shared_intermediate_size, activation)
                if gated
                else MLP(hidden_size, shared_intermediate_size, activation, bias=False)
            )
        self.shared_gate = nn.Linear(hidden_size, 1, bias=False) if shared_gate else None
        self.output_norm = RMSNorm(hidden_size, output_norm_eps) if output_norm_eps is not None else None

    def router_logits(self, tokens: torch.Tensor) -> torch.Tensor:
        """Router logits [T, E], rounded where the family's reference rounds them (RouterSpec.logits_in_float32)."""
        if self.spec.logits_in_float32:
            return F.linear(tokens.float(), self.router.weight.float())
        return F.linear(tokens, self.router.weight.to(tokens.dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        tokens = x.reshape(-1, shape[-1])
        logits = self.router_logits(tokens).float()
        bias = None if self.e_score_correction_bias is None else self.e_score_correction_bias.float()
        weights, indices = route(logits, self.spec, bias)
        out = torch.zeros_like(tokens)
        for expert in indices.unique().tolist():
            token_idx, slot = torch.where(indices == expert)
            h = tokens[token_idx]
            if self.weights_on_input:  # Llama 4: the expert reads its routing weight times the token, in its dtype
                h = h * weights[token_idx, slot, None].to(h.dtype)
            if self.gated:
                gate, up = F.linear(h, self.experts_gate_up[expert]).chunk(2, dim=-1)
                y = F.linear(self.act(gate, up), self.experts_down[expert])
            else:
                y = F.linear(self.act(F.linear(h, self.experts_up[expert])), self.experts_down[expert])
            # a token meets an expert at most once, so the indices are unique and an indexed add is exact
            out[token_idx] += y if self.weights_on_input else (y * weights[token_idx, slot, None]).to(out.dtype)
        if self.shared is not None:
            shared = self.shared(tokens)
            if self.shared_gate is not None:
                shared = torch.sigmoid(self.shared_gate(tokens)) * shared
            out = (out + shared) / 2 if self.shared_average else out + shared
        out = out.view(shape)
        return self.output_norm(out) if self.output_norm is not None else out
