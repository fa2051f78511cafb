"""MoE block vs transformers' MoE blocks with copied weights (float32): mixtral (softmax, top-k renormalised),
qwen2_moe (softmax, no renormalisation, sigmoid-gated shared expert), deepseek_v3 (sigmoid scores, group-limited
selection with a correction bias that only affects selection, routed scaling, shared experts)."""

from __future__ import annotations

import pytest
import torch

from onboard.blocks.mlp import GatedMLP
from onboard.blocks.moe import MoE, RouterSpec, route
from tests.blocks._hf import copy_linear, fuse_linear, randomize

HIDDEN, E, I_MOE, TOKENS = 32, 8, 16, 23


def _copy_experts(ours: MoE, hf_moe) -> None:
    with torch.no_grad():
        ours.router.weight.copy_(hf_moe.gate.weight)
        ours.experts_gate_up.copy_(hf_moe.experts.gate_up_proj)
        ours.experts_down.copy_(hf_moe.experts.down_proj)


def _copy_mlp(ours: GatedMLP, hf_mlp) -> None:
    fuse_linear(ours.gate_up_proj, hf_mlp.gate_proj, hf_mlp.up_proj)
    copy_linear(ours.down_proj, hf_mlp.down_proj)


def _x() -> torch.Tensor:
    return torch.randn(1, TOKENS, HIDDEN, generator=torch.Generator().manual_seed(5))


def test_mixtral() -> None:
    from transformers import MixtralConfig
    from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock

    cfg = MixtralConfig(hidden_size=HIDDEN, intermediate_size=I_MOE, num_local_experts=E, num_experts_per_tok=2)
    hf = MixtralSparseMoeBlock(cfg).eval()
    randomize(hf)
    ours = MoE(HIDDEN, E, I_MOE, RouterSpec(top_k=2))
    _copy_experts(ours, hf)
    with torch.no_grad():
        torch.testing.assert_close(ours(_x()), hf(_x()), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm_topk_prob", [False, True])
def test_qwen2_moe_shared_expert_with_gate(norm_topk_prob: bool) -> None:
    from transformers import Qwen2MoeConfig
    from transformers.models.qwen2_moe.modeling_qwen2_moe import Qwen2MoeSparseMoeBlock

    cfg = Qwen2MoeConfig(
        hidden_size=HIDDEN,
        num_experts=E,
        num_experts_per_tok=3,
        moe_intermediate_size=I_MOE,
        shared_expert_intermediate_size=24,
        norm_topk_prob=norm_topk_prob,
    )
    hf = Qwen2MoeSparseMoeBlock(cfg).eval()
    randomize(hf)
    ours = MoE(
        HIDDEN,
        E,
        I_MOE,
        RouterSpec(top_k=3, norm_topk_prob=norm_topk_prob),
        shared_intermediate_size=24,
        shared_gate=True,
    )
    _copy_experts(ours, hf)
    _copy_mlp(ours.shared, hf.shared_expert)
    copy_linear(ours.shared_gate, hf.shared_expert_gate)
    with torch.no_grad():
        torch.testing.assert_close(ours(_x()), hf(_x()), atol=1e-5, rtol=1e-5)


def test_deepseek_v3_noaux_tc_groups_bias_scaling_shared() -> None:
    from transformers import DeepseekV3Config
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3MoE

    cfg = DeepseekV3Config(
        hidden_size=HIDDEN,
        n_routed_experts=E,
        num_experts_per_tok=2,
        moe_intermediate_size=I_MOE,
        n_shared_experts=2,
        n_group=4,
        topk_group=2,
        routed_scaling_factor=2.5,
        norm_topk_prob=True,
    )
    hf = DeepseekV3MoE(cfg).eval()
    randomize(hf)
    bias = torch.randn(E, generator=torch.Generator().manual_seed(9)) * 0.5
    hf.gate.e_score_correction_bias.copy_(bias)
    spec = RouterSpec(
        top_k=2, scoring="sigmoid", routed_scaling_factor=2.5, correction_bias=True, n_group=4, topk_group=2
    )
    ours = MoE(HIDDEN, E, I_MOE, spec, shared_intermediate_size=2 * I_MOE)
    _copy_experts(ours, hf)
    _copy_mlp(ours.shared, hf.shared_experts)
    with torch.no_grad():
        ours.e_score_correction_bias.copy_(bias)
        torch.testing.assert_close(ours(_x()), hf(_x()), atol=1e-5, rtol=1e-5)
        # Routing itself, token by token: same experts (as sets) and the same weights.
        logits = torch.nn.functional.linear(_x().view(-1, HIDDEN), hf.gate.weight)
        _, hf_w, hf_idx = hf.gate(_x())
        w, idx = route(logits, spec, bias)
    hf_sorted, order = hf_idx.sort(dim=-1)
    our_sorted, our_order = idx.sort(dim=-1)
    assert torch.equal(our_sorted, hf_sorted)
    torch.testing.assert_close(w.gather(1, our_order), hf_w.gather(1, order), atol=1e-6, rtol=1e-6)


def test_nemotron_h_plain_experts_and_shared_expert() -> None:
    """Nemotron-H's MoE: DeepSeek-V3's sigmoid group routing, but plain experts and shared expert, down(relu2(up(x))):
    gated=False, shown to differ from squared-ReLU the other way round (the activation is what is compared)."""
    from transformers import AutoConfig
    from transformers.models.nemotron_h.modeling_nemotron_h import NemotronHMoE

    cfg = AutoConfig.for_model("nemotron_h", hidden_size=HIDDEN, n_routed_experts=E, num_experts_per_tok=2,
                               moe_intermediate_size=I_MOE, moe_shared_expert_intermediate_size=2 * I_MOE,
                               n_group=4, topk_group=2, routed_scaling_factor=2.5, mlp_hidden_act="relu2")  # fmt: skip
    hf = NemotronHMoE(cfg).eval()
    randomize(hf)
    bias = torch.randn(E, generator=torch.Generator().manual_seed(9)) * 0.5
    hf.gate.e_score_correction_bias.copy_(bias)
    spec = RouterSpec(top_k=2, scoring="sigmoid", routed_scaling_factor=2.5, correction_bias=True, n_group=4,
                      topk_group=2, logits_in_float32=True)  # fmt: skip
    ours = MoE(HIDDEN, E, I_MOE, spec, activation="relu2", shared_intermediate_size=2 * I_MOE, gated=False)
    with torch.no_grad():
        ours.router.weight.copy_(hf.gate.weight)
        ours.e_score_correction_bias.copy_(bias)
        ours.experts_up.copy_(hf.experts.up_proj)
        ours.experts_down.copy_(hf.experts.down_proj)
        copy_linear(ours.shared.up_proj, hf.shared_experts.up_proj)
        copy_linear(ours.shared.down_proj, hf.shared_experts.down_proj)
        expected = hf(_x())
        torch.testing.assert_close(ours(_x()), expected, atol=1e-5, rtol=1e-5)
        ours.act = torch.nn.functional.silu
        assert (ours(_x()) - expected).abs().max() > 1e-3


def test_axk1_output_norm_after_routed_plus_shared() -> None:
    """A.X-K1's MoE: DeepSeek-V3's, then an RMSNorm (non-uniform weight) on routed + shared experts' output."""
    from transformers import AXK1Config
    from transformers.models.axk1.modeling_axk1 import AXK1MoE

    cfg = AXK1Config(hidden_size=HIDDEN, n_routed_experts=E, num_experts_per_tok=2, moe_intermediate_size=I_MOE,
                     n_shared_experts=1, n_group=4, topk_group=2, routed_scaling_factor=2.5, rms_norm_eps=1e-5)  # fmt: skip
    hf = AXK1MoE(cfg).eval()
    randomize(hf)
    spec = RouterSpec(top_k=2, scoring="sigmoid", routed_scaling_factor=2.5, correction_bias=True, n_group=4,
                      topk_group=2)  # fmt: skip
    ours = MoE(HIDDEN, E, I_MOE, spec, shared_intermediate_size=I_MOE, output_norm_eps=1e-5)
    _copy_experts(ours, hf)
    _copy_mlp(ours.shared, hf.shared_experts)
    with torch.no_grad():
        ours.e_score_correction_bias.copy_(hf.gate.e_score_correction_bias)
        weight = hf.post_mlp_layernorm.weight
        weight.copy_(torch.rand(HIDDEN, generator=torch.Generator().manual_seed(4)) + 0.5)
        ours.output_norm.weight.copy_(weight)
        expected = hf(_x())
        torch.testing.assert_close(ours(_x()), expected, atol=1e-5, rtol=1e-5)
        ours.output_norm = None
        assert (ours(_x()) - expected).abs().max() > 1e-2  # without it: the block's raw output


@pytest.mark.parametrize(("selection", "strategy"), [("softmax", "average"), ("sigmoid", "sum")])
def test_cohere2_moe_selection_and_shared_combination(selection: str, strategy: str) -> None:
    """Cohere2-MoE: top-k of the raw logits, then softmax over the chosen ones (= renormalised softmax) or their
    sigmoids (renormalised with norm_topk_prob); the shared expert averaged with the routed output or added."""
    from transformers import Cohere2MoeConfig
    from transformers.models.cohere2_moe.modeling_cohere2_moe import Cohere2MoeSparseMoeBlock

    cfg = Cohere2MoeConfig(hidden_size=HIDDEN, num_experts=E, num_experts_per_tok=2, intermediate_size=I_MOE,
                           num_shared_experts=1, expert_selection_fn=selection,
                           shared_expert_combination_strategy=strategy, norm_topk_prob=True)  # fmt: skip
    hf = Cohere2MoeSparseMoeBlock(cfg).eval()
    randomize(hf)
    spec = RouterSpec(top_k=2, scoring=selection, norm_topk_prob=True)
    ours = MoE(HIDDEN, E, I_MOE, spec, shared_intermediate_size=I_MOE, shared_average=strategy == "average")
    _copy_experts(ours, hf)
    _copy_mlp(ours.shared, hf.shared_experts)
    with torch.no_grad():
        expected = hf(_x())
        torch.testing.assert_close(ours(_x()), expected, atol=1e-5, rtol=1e-5)
        ours.shared_average = strategy != "average"
        assert (ours(_x()) - expected).abs().max() > 1e-3  # the combination matters


@pytest.mark.parametrize("norm_min", [1e-12, 0.9], ids=["default", "clamping"])
def test_ernie_router_softmax_bias_and_norm_min(norm_min: float) -> None:
    """ERNIE MoE: softmax scores, selection by scores + a correction bias stored [1, E], weights renormalised by
    their sum clamped to at least moe_norm_min (0.9 makes the clamp bite on top-2 of 8)."""
    from transformers import Ernie4_5_MoeConfig
    from transformers.models.ernie4_5_moe.modeling_ernie4_5_moe import Ernie4_5_MoeTopKRouter

    cfg = Ernie4_5_MoeConfig(hidden_size=HIDDEN, num_experts=E, num_experts_per_tok=2, moe_norm_min=norm_min)
    hf = Ernie4_5_MoeTopKRouter(cfg)
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        hf.weight.copy_(torch.randn(E, HIDDEN, generator=g))
        hf.moe_statics.e_score_correction_bias.copy_(torch.randn(1, E, generator=g) * 0.1)
    spec = RouterSpec(top_k=2, correction_bias=True, norm_min=norm_min, logits_in_float32=True)
    tokens = _x().view(-1, HIDDEN)
    with torch.no_grad():
        _, hf_w, hf_idx = hf(tokens)
        bias = hf.moe_statics.e_score_correction_bias[0]
        w, idx = route(torch.nn.functional.linear(tokens.float(), hf.weight.float()), spec, bias)
        _, unbiased = route(torch.nn.functional.linear(tokens.float(), hf.weight.float()), spec, None)
    assert torch.equal(idx.sort(dim=-1).values, hf_idx.sort(dim=-1).values)
    torch.testing.assert_close(w.sort(dim=-1).values, hf_w.sort(dim=-1).values, atol=1e-6, rtol=1e-6)
    assert not torch.equal(unbiased.sort(dim=-1).values, idx.sort(dim=-1).values)  # the bias moved some choices
    if norm_min > 0.5:
        assert float(w.sum(dim=-1).min()) < 0.999  # clamped sums: the weights no longer add up to 1


def test_correction_bias_changes_selection_not_weights() -> None:
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]])
    spec = RouterSpec(top_k=1, scoring="sigmoid", norm_topk_prob=False, correction_bias=True)
    w, idx = route(logits, spec, torch.tensor([0.0, 0.0, 0.0, 5.0]))
    assert idx.tolist() == [[3]]
    torch.testing.assert_close(w, torch.sigmoid(torch.tensor([[-1.0]])))


def test_bad_group_count_rejected() -> None:
    with pytest.raises(ValueError, match="divisible"):
        MoE(HIDDEN, 6, I_MOE, RouterSpec(top_k=2, n_group=4))
