"""Active parameters per token, checked against an independent count from the model itself (issue 16).

The expected count is taken from transformers' own module tree, instantiated on the meta device (no weights):
non-expert parameters + top_k / num_experts x the parameters of the routed `experts` modules, with top_k and
num_experts read from the instantiated router/MoE blocks (their `top_k` and `num_experts` attributes), not from
config.json's aliases that inspect reads. Inspect's count comes from the same tensors as a checkpoint would store
them (state dict, tied weights once, persistent buffers included), through `profile_from_parts`: the path a folder's
safetensors headers take. Shared experts and dense-first layers are in every architecture that has them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from onboard.inspect_checkpoint import profile_from_parts
from onboard.inspect_checkpoint.checkpoint_types import TensorInfo
from tests.tiny.factory import make_tiny_config
from tests.tiny.tiny_moe import MOE


def meta_model(config: Any) -> Any:
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config, trust_remote_code=False)


def routing(model: Any) -> tuple[int, int]:
    """(top_k, num_experts) as the modelling code's router/MoE blocks hold them (one value each in the model)."""
    top_k, experts = set(), set()
    for module in model.modules():
        for attr, into in (("top_k", top_k), ("num_experts_per_tok", top_k), ("num_experts", experts)):
            value = getattr(module, attr, None)
            if isinstance(value, int) and not isinstance(value, bool):
                into.add(value)
    assert len(top_k) == 1 and len(experts) == 1, (top_k, experts)
    return top_k.pop(), experts.pop()


def routed_expert_parameters(model: Any) -> list[Any]:
    """Weights of the routed experts, by module structure: stacked experts (a module class named *Experts, e.g.
    MixtralExperts, JetMoeParallelExperts) or one MLP per expert (an `experts` ModuleList). Shared experts (held as
    `shared_expert(s)` / `shared_mlp`) always run; routers and biases added after the experts are not experts."""
    import torch

    found: dict[int, Any] = {}
    for name, module in model.named_modules():
        attribute = name.rsplit(".", 1)[-1]
        stacked = type(module).__name__.endswith("Experts")
        per_expert = attribute == "experts" and isinstance(module, torch.nn.ModuleList)
        if (stacked or per_expert) and "shared" not in attribute:
            found.update((id(p), p) for p in module.parameters())
    return list(found.values())


def expected_active(model: Any) -> float:
    top_k, num_experts = routing(model)
    total = sum(p.numel() for p in model.parameters())
    routed = sum(p.numel() for p in routed_expert_parameters(model))
    assert 0 < routed < total
    return total - routed + routed * top_k / num_experts


def checkpoint_tensors(model: Any) -> dict[str, TensorInfo]:
    """What save_pretrained would store, as headers: every state-dict tensor once (tied weights once), bf16."""
    out, seen = {}, set()
    for name, tensor in model.state_dict(keep_vars=True).items():
        if id(tensor) not in seen:
            seen.add(id(tensor))
            out[name] = TensorInfo(name, "BF16", tuple(tensor.shape), (0, 2 * tensor.numel()), "model.safetensors")
    return out


def inspect_counts(config: dict, model: Any) -> Any:
    profile = profile_from_parts(config, checkpoint_tensors(model))
    assert profile.parameters is not None
    return profile.parameters


# JetMoE stores its MLP experts stacked as `mlp.input_linear` / `mlp.output_linear` ([experts, out, in]) and adds one
# always-run bias after its attention experts: both once miscounted (every expert active: 286,720 vs 188,480 on the
# tiny config), now part of this comparison like every other architecture.
@pytest.mark.parametrize("model_type", sorted(MOE))
def test_active_parameters_of_every_tiny_moe_architecture(model_type: str) -> None:
    try:
        config = make_tiny_config(model_type)
    except KeyError as exc:  # a MOE entry this transformers lacks: the tiny factory says which
        pytest.skip(f"{model_type}: not in the installed transformers ({exc}); a newer transformers would check it")
    model = meta_model(config)
    counts = inspect_counts(config.to_dict(), model)
    assert counts.total == sum(p.numel() for p in model.parameters())
    assert counts.active < counts.total
    assert abs(counts.active - expected_active(model)) <= 1  # inspect's integer division


def test_deepseek_v3_activates_37_55b_of_671b(shared_data) -> None:
    """DeepSeek-V3/R1 (the R1 mirror's config): 3 dense-first layers, 1 shared + 8 of 256 routed experts."""
    config = json.loads((shared_data / "deepseek/deepseek-r1_hf-mirror/config.json").read_text())
    from transformers import AutoConfig

    plain = {k: v for k, v in config.items() if k not in ("quantization_config", "auto_map", "model_type")}
    model = meta_model(AutoConfig.for_model(config["model_type"], **plain))  # bf16 shapes: fp8 scales aside
    counts = inspect_counts(config, model)
    assert counts.total == sum(p.numel() for p in model.parameters()) == 671_026_404_352  # transformers', published
    assert counts.active == 37_552_282_624  # the 37.55B quoted; without the MTP layer transformers drops
    assert abs(counts.active - expected_active(model)) <= 1
    assert counts.by_component["shared_experts"] > 0 and counts.by_component["mlp"] > 0  # shared, dense-first
    assert counts.by_component["buffers"] == 58 * 256  # e_score_correction_bias per MoE layer: not in the total


def test_a_dense_model_activates_every_parameter_in_its_stored_dtype() -> None:
    config = make_tiny_config("llama")
    model = meta_model(config)
    counts = inspect_counts(config.to_dict(), model)
    total = sum(p.numel() for p in model.parameters())
    assert (counts.total, counts.active, counts.by_dtype) == (total, total, {"BF16": total})


def tensor(name: str, shape: tuple[int, ...], dtype: str = "BF16") -> TensorInfo:
    import math

    from onboard.inspect_checkpoint.checkpoint_types import DTYPE_BYTES

    return TensorInfo(name, dtype, shape, (0, DTYPE_BYTES[dtype] * math.prod(shape)), "model.safetensors")


def test_buffers_and_quantization_scales_are_counted_apart_from_the_parameters() -> None:
    from onboard.inspect_checkpoint.params import count_parameters
    from onboard.inspect_checkpoint.tensor_index import TensorIndex
    from onboard.profile import Moe

    stored = {t.name: t for t in (
        tensor("model.layers.0.mlp.experts.0.up_proj.weight", (8, 4)),
        tensor("model.layers.0.mlp.experts.1.up_proj.weight", (8, 4)),
        tensor("model.layers.0.mlp.gate.weight", (2, 4)),
        tensor("model.layers.0.mlp.gate.e_score_correction_bias", (2,), "F32"),
        tensor("model.layers.0.mlp.router.expert_bias", (2,), "F32"),
        tensor("model.layers.0.mlp.gate.bias", (2,), "F32"),
        tensor("model.layers.0.self_attn.q_proj.weight_scale_inv", (1, 1), "F32"),
    )}  # fmt: skip
    index = TensorIndex.from_tensors(stored)
    moe = Moe(num_experts=2, top_k=1)
    # Unknown family: the generic guess, e_score_correction_bias and its alias expert_bias, are buffers.
    generic = count_parameters(index, moe, None)
    assert generic.by_component["buffers"] == 4 and generic.by_component["quant_scales"] == 1
    assert generic.total == 64 + 8 + 2 and generic.by_dtype == {"BF16": 72, "F32": 2}
    assert generic.active == 72 + 2 - 32
    # A catalog entry naming a full template (a buffer saved under another name) marks exactly that tensor.
    catalog = count_parameters(index, moe, ("model.layers.{}.mlp.gate.bias",))
    assert catalog.by_component["buffers"] == 2 and catalog.total == 64 + 8 + 4


def test_granite_moe_checkpoint_names_count_stacked_experts_as_routed() -> None:
    """Granite-MoE checkpoints on the hub store experts as `block_sparse_moe.input_linear` (the names transformers 5
    converts at load): routed, so only top_k of num_experts count as active; the shared MLP's same names always run."""
    from onboard.inspect_checkpoint.params import count_parameters
    from onboard.inspect_checkpoint.tensor_index import TensorIndex
    from onboard.profile import Moe

    stored = {t.name: t for t in (
        tensor("model.layers.0.block_sparse_moe.input_linear.weight", (4, 16, 8)),
        tensor("model.layers.0.block_sparse_moe.output_linear.weight", (4, 8, 8)),
        tensor("model.layers.0.block_sparse_moe.router.layer.weight", (4, 8)),
        tensor("model.layers.0.shared_mlp.input_linear.weight", (16, 8)),
        tensor("model.layers.0.shared_mlp.output_linear.weight", (8, 8)),
    )}  # fmt: skip
    counts = count_parameters(TensorIndex.from_tensors(stored), Moe(num_experts=4, top_k=1), None)
    assert counts.by_component == {"experts": 768, "router": 32, "shared_experts": 192}
    assert (counts.total, counts.active) == (992, 992 - 768 + 768 // 4)


def test_a_moe_checkpoint_without_routed_expert_tensors_discounts_nothing() -> None:
    """A MoE config whose checkpoint stores no tensor of the routed experts (only a router and a shared MLP, e.g.
    experts under names onboard does not know): nothing is discounted, active equals total, and the counts stay
    integers as profile.json writes them."""
    from onboard.inspect_checkpoint.params import count_parameters
    from onboard.inspect_checkpoint.tensor_index import TensorIndex
    from onboard.profile import Moe

    stored = {t.name: t for t in (
        tensor("model.layers.0.mlp.router.layer.weight", (4, 8)),
        tensor("model.layers.0.shared_mlp.input_linear.weight", (16, 8)),
    )}  # fmt: skip
    counts = count_parameters(TensorIndex.from_tensors(stored), Moe(num_experts=4, top_k=1), None)
    assert counts.by_component == {"router": 32, "shared_experts": 128}
    assert counts.active == counts.total == 160
    routed = count_parameters(TensorIndex.from_tensors({
        "model.layers.0.mlp.experts.gate_up_proj": tensor("model.layers.0.mlp.experts.gate_up_proj", (4, 6, 8)),
    }), Moe(num_experts=4, top_k=2), None)  # fmt: skip
    assert (routed.total, routed.active) == (192, 96)
    assert isinstance(routed.active, int) and isinstance(counts.active, int)
