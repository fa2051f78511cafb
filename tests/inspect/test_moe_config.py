"""Every spelling of the MoE facts that families use in config.json is read (issue 16, from moe_config's survivors).

Each alias exists because some family's config spells the fact that way (Mixtral `num_local_experts`, Qwen
`num_experts`, DeepSeek `n_routed_experts`, ERNIE `moe_num_experts` / `moe_k`, gpt-oss `experts_per_token`, ...):
a typo in one silently turns that family dense or top-1, so each is checked alone.
"""

from __future__ import annotations

import pytest

from onboard.inspect_checkpoint.config_view import ConfigView
from onboard.inspect_checkpoint.moe_config import moe_from_config, moe_layers_from_config


def moe(config: dict, tensors: tuple[str, ...] | None = None):
    return moe_from_config(
        ConfigView({"model_type": "some_moe", **config}), dict.fromkeys(tensors) if tensors else None
    )


@pytest.mark.parametrize(
    "key", ["num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts", "num_routed_experts"]
)
def test_every_expert_count_spelling(key: str) -> None:
    found = moe({key: 16, "num_experts_per_tok": 4})
    assert found is not None and (found.num_experts, found.top_k) == (16, 4)


@pytest.mark.parametrize(
    "key",
    ["num_experts_per_tok", "moe_k", "experts_per_token", "moe_top_k", "num_selected_experts", "moe_topk",
     "num_experts_per_token", "top_k_experts"],
)  # fmt: skip
def test_every_top_k_spelling(key: str) -> None:
    found = moe({"num_experts": 16, key: 3})
    assert found is not None and found.top_k == 3


def test_dbrx_ffn_config() -> None:
    dbrx = moe({"ffn_config": {"moe_num_experts": 16, "moe_top_k": 4}})
    assert dbrx is not None and (dbrx.num_experts, dbrx.top_k) == (16, 4)


def test_no_or_one_expert_is_dense_and_a_missing_top_k_is_one() -> None:
    assert moe({}) is None
    assert moe({"num_experts": 1, "num_experts_per_tok": 1}) is None
    assert moe({"num_experts": "many"}) is None
    found = moe({"num_experts": 2})
    assert found is not None and found.top_k == 1
    found = moe({"num_experts": 2, "num_experts_per_tok": 0})
    assert found is not None and found.top_k == 1


@pytest.mark.parametrize(
    ("config", "tensors", "shared"),
    [
        ({"n_shared_experts": 2}, None, 2),
        ({"num_shared_experts": 2}, None, 2),
        ({"moe_num_shared_experts": 2}, None, 2),
        ({"shared_expert_count": 2}, None, 2),
        ({"shared_expert_intermediate_size": 64}, None, 1),  # Qwen2-MoE: a size, no count
        ({"moe_shared_expert_intermediate_size": 64}, None, 1),
        ({}, ("model.layers.0.mlp.shared_expert.up_proj.weight",), 1),  # only the tensors show it
        ({}, ("model.layers.0.mlp.experts.0.up_proj.weight",), 0),
    ],
)
def test_shared_experts_from_a_count_a_size_or_the_tensors(config: dict, tensors: tuple | None, shared: int) -> None:
    found = moe({"num_experts": 8, "num_experts_per_tok": 2, **config}, tensors)
    assert found is not None and found.num_shared_experts == shared
    size = config.get("shared_expert_intermediate_size", config.get("moe_shared_expert_intermediate_size"))
    assert found.shared_expert_intermediate_size == size


def test_routing_details() -> None:
    deepseek = moe_from_config(ConfigView({"model_type": "deepseek_v3", "n_routed_experts": 256,
                                           "num_experts_per_tok": 8, "topk_method": "noaux_tc",
                                           "norm_topk_prob": True, "routed_scaling_factor": 2.5, "n_group": 8,
                                           "topk_group": 4, "moe_intermediate_size": 2048}), None)  # fmt: skip
    assert deepseek is not None
    assert (deepseek.scoring, deepseek.correction_bias, deepseek.norm_topk_prob) == ("sigmoid", True, True)
    assert (deepseek.routed_scaling_factor, deepseek.n_group, deepseek.topk_group) == (2.5, 8, 4)
    assert deepseek.expert_intermediate_size == 2048
    plain = moe({"num_experts": 8, "num_experts_per_tok": 2, "intermediate_size": 96})
    assert plain is not None
    assert (plain.scoring, plain.correction_bias, plain.norm_topk_prob) == ("softmax", False, None)
    assert plain.expert_intermediate_size == 96
    assert moe({"num_experts": 8, "expert_intermediate_size": 48}).expert_intermediate_size == 48
    assert moe({"num_experts": 8, "norm_topk_prob": False}).norm_topk_prob is False
    assert moe({"num_experts": 8, "scoring_func": "sigmoid"}).scoring == "sigmoid"
    assert moe({"num_experts": 8, "router_scoring_func": "sigmoid"}).scoring == "sigmoid"
    for leaf in ("mlp.gate.e_score_correction_bias", "mlp.router.expert_bias", "mlp.moe_statics.e_score_correction"):
        assert moe({"num_experts": 8}, (f"model.layers.0.{leaf}",)).correction_bias, leaf


def layers(config: dict, n: int = 6) -> list[int]:
    """Indices of the MoE layers."""
    plan = moe_layers_from_config(ConfigView({"model_type": "some_moe", **config}), n)
    assert sorted(plan) == list(range(n))
    return [i for i, is_moe in plan.items() if is_moe]


def test_which_layers_are_moe() -> None:
    assert layers({}) == [0, 1, 2, 3, 4, 5]
    for key in ("first_k_dense_replace", "moe_layer_start_index", "num_dense_layers"):
        assert layers({key: 3}) == [3, 4, 5], key
    # As each model's code reads them (tests/inspect/test_moe_layers_vs_modelling.py): DeepSeek's freq from layer 0,
    # the others at the end of each period.
    assert layers({"moe_layer_freq": 2}) == [0, 2, 4]
    for key in ("decoder_sparse_step", "interleave_moe_layer_step", "moe_layer_interval"):
        assert layers({key: 2}) == [1, 3, 5], key
    assert layers({"first_k_dense_replace": 1, "moe_layer_freq": 2}) == [2, 4]
    assert layers({"mlp_only_layers": [0, 4]}) == [1, 2, 3, 5]
    assert layers({"expert_layer_period": 2, "expert_layer_offset": 1}) == [1, 3, 5]  # Jamba
    assert layers({"expert_layer_period": 3}) == [0, 3]
    types = ["dense", "sparse", "moe", "hash_moe", "Sparse", "dense"]
    assert layers({"mlp_layer_types": types}) == [1, 2, 3, 4]
    assert layers({"mlp_layer_types": ["sparse"]}) == [0, 1, 2, 3, 4, 5]  # too short: ignored
