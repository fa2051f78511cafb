"""Mixture-of-experts feed-forward: routing (softmax or sigmoid scores, optional group-limited selection with a
correction bias that affects only *which* experts are chosen, top-k normalisation, routed scaling factor), stacked
gated experts, and optional shared experts (with qwen2_moe's sigmoid gate). Dense-first layers (DeepSeek's
`first_k_dense_replace`) are the caller's choice of GatedMLP instead of MoE.

Parameters: `router` [E, hidden] (no bias); `e_score_correction_bias` [E] (only with `correction_bias=True`);
`experts_gate_up` [E, 2*I, hidden] ([gate; up] rows per expert) or, with `gated=False` (Nemotron-H's experts:
down(act(up(x)))), `experts_up` [E, I, hidden]; `experts_down` [E, hidden, I]; `shared` (GatedMLP, or MLP when not
gated) and `shared_gate` (Linear hidden->1) when configured; `output_norm` (RMSNorm on the block's output, routed
plus shared: A.X-K1's post_mlp_layernorm) with `output_norm_eps`. `weights_on_input`: each expert reads its routing
weight times the token and its output is summed unweighted (Llama 4; not the same for a non-linear expert).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .mlp import ACTIVATIONS, GATED_ACTIVATIONS, MLP, GatedMLP
from .norms import RMSNorm


@dataclass(frozen=True)
class RouterSpec:
    """How tokens pick experts. scoring "softmax" (mixtral, qwen) or "sigmoid" (deepseek v3, glm4_moe)."""

    top_k: int
    scoring: str = "softmax"
    norm_topk_prob: bool = True
    routed_scaling_factor: float = 1.0
    correction_bias: bool = False
    n_group: int = 1
    topk_group: int = 1
    group_score: str = "top2_sum"
    """How a group is ranked for group-limited routing: "top2_sum" (DeepSeek-V3 noaux_tc: its two best experts) or
    "max" (DeepSeek-V2 group_limited_greedy: its best expert)."""
    select_by: str = "scores"
    """What the top-k (plus any correction bias) ranks: "scores" (every family but one), or "logits" (Kolibri: raw
    router logits + bias; the weights are still the chosen experts' scores)."""
    norm_min: float = 0.0
    """With norm_topk_prob: the chosen weights' sum is clamped to at least this before dividing (ERNIE MoE's
    moe_norm_min); 0: divided by the sum itself."""
    logit_softcap: float = 0.0
    """Router logits -> cap * tanh(logits / cap) before scoring (Laguna's moe_router_logit_softcapping); 0: none."""
    logits_in_float32: bool = False
    """Router logits from float32 activations and weight (DeepSeek V2/V3, GLM-4 MoE, ERNIE MoE in transformers);
    False: in the activation dtype, then scored in float32 (Mixtral, Qwen MoE, OLMoE, gpt-oss in transformers and in
    vLLM's bf16 gate). Each family's reference rounds at one of these two points; matching it keeps near-tie expert
    choices the same as the reference's in bf16."""


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
        # Group-limited routing (DeepSeek-V3 noaux_tc): keep the topk_group groups whose two best experts score
        # highest (DeepSeek-V2 group_limited_greedy: whose best expert does), mask the rest out of the selection.
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
    """Sparse MoE block: forward(x [..., hidden]) -> [..., hidden]. `shared_average`: (routed + shared) / 2 instead of
    their sum (Cohere2-MoE's shared_expert_combination_strategy "average"). `output_norm_eps`: an RMSNorm on the
    block's output (A.X-K1 normalises its MoE layers' output, not its dense layers')."""

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
        table = GATED_ACTIVATIONS if gated else ACTIVATIONS
        if activation not in table:
            raise ValueError(f"MoE: unsupported {'gated' if gated else 'plain'} activation {activation!r}")
        self.act, self.gated = table[activation], gated
        # The router weight and correction bias are stored in float32 whatever the model's dtype (exact for bf16
        # checkpoints): rounding DeepSeek-V3's float32 gate to bf16 flipped experts on near-ties (issue 10);
        # transformers keeps them float32 (`_keep_in_fp32_modules_strict`). Where the logits are rounded is the
        # family's choice: RouterSpec.logits_in_float32.
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
        # Loop over the experts that received tokens (fine for CPU parity and small batches).
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
            # A token meets an expert at most once (top-k picks distinct experts), so the indices are unique and
            # an indexed add is exact — and ~3x faster on CPU than index_add_ (benchmarks/bench_adapter_forward.py).
            out[token_idx] += y if self.weights_on_input else (y * weights[token_idx, slot, None]).to(out.dtype)
        if self.shared is not None:
            shared = self.shared(tokens)
            if self.shared_gate is not None:
                shared = torch.sigmoid(self.shared_gate(tokens)) * shared
            # Cohere2-MoE's "average" strategy halves the sum of the routed and the shared outputs
            out = (out + shared) / 2 if self.shared_average else out + shared
        out = out.view(shape)
        return self.output_norm(out) if self.output_norm is not None else out
