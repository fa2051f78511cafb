"""Inspect reads checkpoints as their authors publish them, not as transformers names modules after loading.

`save_pretrained` reverts transformers' load-time renames, so a tiny checkpoint on disk carries the release's own
names: Ergo's `layers.N.feed_forward.up_proj` ([experts, hidden, inter], no `.weight`), `gate_kernel` and
`router_bias`; Param2-MoE's `attention.query_key_value`; Kolibri 1.1's `moe.router.expert_bias`. The expected values
come from transformers' model loaded from those files (its own parameters and modules), never from inspect.
"""

from __future__ import annotations

import pytest

from onboard.inspect_checkpoint import inspect
from tests.inspect.test_active_params import expected_active
from tests.tiny.fixtures import tiny_checkpoint  # noqa: F401  (session fixture)
from tests.tiny.tiny_moe import MOE


@pytest.mark.slow
@pytest.mark.parametrize("model_type", sorted(MOE))
def test_active_parameters_from_the_saved_checkpoint(model_type: str, tiny_checkpoint) -> None:  # noqa: F811
    """Total and active parameters from the headers of the checkpoint on disk equal transformers' count of the model
    it loads from those files: routed experts under any name count top_k / num_experts, buffers not at all."""
    from transformers import AutoModelForCausalLM

    folder = tiny_checkpoint(model_type)
    model = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=False)
    counts = inspect(str(folder), kv_dtype="float32", max_model_len=64).parameters
    assert counts.total == model.num_parameters()
    assert abs(counts.active - expected_active(model)) <= 1  # inspect's integer division


# Read from each family's modelling code in transformers 5.25: the router that adds the correction bias, and what
# it scores with before ranking scores + bias.
ROUTERS = {
    "ergo": "sigmoid",  # ErgoTopkRouter: router_logits.sigmoid(), stored as gate_kernel / router_bias
    "kolibri1_1": "sigmoid",  # Kolibri1_1TopKRouter, stored as mlp.gate / moe.router.expert_bias
    "minicpm5_moe": "sigmoid",  # MiniCPM5MoeTopkRouter (DeepSeek-V3's, float32 logits)
    "param2moe": "sigmoid",  # Glm4MoeTopkRouter, stored as mlp.gate.expert_bias
    "ernie4_5_moe": "softmax",  # Ernie4_5_MoeTopKRouter: F.softmax, then moe_statics adds the bias for ranking
    "longcat_flash": "softmax",  # LongcatFlashTopkRouter: router_logits.softmax(dim=-1) + e_score_correction_bias
}


@pytest.mark.slow
@pytest.mark.parametrize("model_type", sorted(ROUTERS))
def test_router_scoring_of_families_with_a_correction_bias(model_type: str, tiny_checkpoint) -> None:  # noqa: F811
    moe = inspect(str(tiny_checkpoint(model_type)), kv_dtype="float32", max_model_len=64).moe
    assert moe is not None and moe.correction_bias
    assert moe.scoring == ROUTERS[model_type]
