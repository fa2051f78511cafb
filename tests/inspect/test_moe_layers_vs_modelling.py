"""Which layers are MoE, read from config.json alone, checked against the modelling code that builds the layers.

The expected layers come from transformers' own model tree on the meta device (a layer is MoE when it holds an
experts module), so each interleaving key is read the way its model reads it: Qwen's `decoder_sparse_step`, Llama 4's
`interleave_moe_layer_step` and ERNIE's `moe_layer_interval` put the MoE layer at the end of each period.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from onboard.inspect_checkpoint.config_view import ConfigView
from onboard.inspect_checkpoint.moe_config import moe_from_config, moe_layers_from_config
from tests.inspect.test_active_params import meta_model
from tests.tiny.factory import make_tiny_config


def layers_with_experts(model: Any) -> list[int]:
    found = set()
    for name, module in model.named_modules():
        match = re.match(r"model\.layers\.(\d+)\.", name)
        if match and (type(module).__name__.endswith("Experts") or name.endswith(".experts")):
            found.add(int(match.group(1)))
    return sorted(found)


def inspect_moe_layers(config: dict) -> list[int]:
    plan = moe_layers_from_config(ConfigView(config), config["num_hidden_layers"])
    return [i for i, is_moe in sorted(plan.items()) if is_moe]


@pytest.mark.parametrize(
    ("model_type", "overrides", "expected"),
    [
        ("qwen2_moe", {"decoder_sparse_step": 2}, [1, 3, 5]),
        ("qwen3_moe", {"decoder_sparse_step": 3, "mlp_only_layers": [5]}, [2]),
        ("llama4_text", {"interleave_moe_layer_step": 2, "moe_layers": None}, [1, 3, 5]),
        ("llama4_text", {"moe_layers": [0, 4]}, [0, 4]),
        ("ernie4_5_moe", {"moe_layer_interval": 2, "moe_layer_start_index": 2, "moe_layer_end_index": 4}, [3]),
        ("ernie4_5_moe", {"moe_layer_interval": 1, "moe_layer_start_index": 1, "moe_layer_end_index": -1},
         [1, 2, 3, 4, 5]),
    ],
)  # fmt: skip
def test_moe_layers_from_config_match_the_modelling_code(model_type: str, overrides: dict, expected: list) -> None:
    config = make_tiny_config(model_type, {"num_hidden_layers": 6, **overrides})
    assert layers_with_experts(meta_model(config)) == expected  # the modelling code, as the test's premise
    saved = config.to_dict()
    assert inspect_moe_layers(saved) == expected
    if "interleave_moe_layer_step" in overrides:  # Llama 4 saves the list it derived; an older config has the step
        del saved["moe_layers"]
        assert inspect_moe_layers(saved) == expected


def test_deepseek_moe_layer_freq_counts_from_layer_zero() -> None:
    """DeepSeek-V2/V3's modelling code (remote code; transformers' port drops the key): a layer is MoE when
    `layer_idx >= first_k_dense_replace and layer_idx % moe_layer_freq == 0`. A 0 frequency, which that code would
    divide by, leaves every layer dense rather than every layer MoE."""
    base = {"model_type": "deepseek_v3", "num_hidden_layers": 8, "first_k_dense_replace": 1}
    assert inspect_moe_layers({**base, "moe_layer_freq": 1}) == [1, 2, 3, 4, 5, 6, 7]
    assert inspect_moe_layers({**base, "moe_layer_freq": 2}) == [2, 4, 6]
    assert inspect_moe_layers({**base, "moe_layer_freq": 0}) == []
    assert inspect_moe_layers({**base, "decoder_sparse_step": 0}) == []


def test_ernie_vl_per_modality_expert_lists_read_the_text_experts() -> None:
    """ERNIE-4.5-VL's remote-code config lists experts per modality ([text, vision]); a text token is routed among
    the first. Read as a list, not ignored as a wrong type (which made the model dense)."""
    config = {"model_type": "ernie4_5_moe_vl", "moe_num_experts": [64, 32], "moe_k": 6,
              "moe_intermediate_size": [1536, 512], "moe_num_shared_experts": 2}  # fmt: skip
    view = ConfigView(config)
    moe = moe_from_config(view, None)
    assert moe is not None
    assert (moe.num_experts, moe.top_k, moe.expert_intermediate_size, moe.num_shared_experts) == (64, 6, 1536, 2)
    assert view.type_errors == {}
    assert moe_from_config(ConfigView({"moe_num_experts": [1, 64]}), None) is None  # one text expert: dense text
