"""What reaches transformers' config classes (inspect_checkpoint/config_class_input.py): its classes expand some
values into Python objects as they are built (a layer_types entry per layer, an id2label entry per label), so an
absurd count in config.json must be refused, or dropped, before them. Found by mutating the fields of real configs:
Gemma 3 with num_hidden_layers 2**70 hung generate's config resolution until it ran out of memory."""

from __future__ import annotations

import pytest

from onboard.errors import ConfigError
from onboard.generate_adapter.config_values import read_config
from onboard.inspect_checkpoint.config_class_input import MAX_LAYERS, for_config_class

GEMMA3 = {"model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 4,
          "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 256}  # fmt: skip


@pytest.mark.parametrize("count", [2**70, MAX_LAYERS + 1, -1])
def test_an_absurd_layer_count_is_refused_before_transformers_builds_its_layer_list(count: int) -> None:
    with pytest.raises(ConfigError, match=f"num_hidden_layers={count} is not a plausible layer count"):
        read_config({**GEMMA3, "num_hidden_layers": count})


def test_a_nested_section_is_checked_and_named() -> None:
    with pytest.raises(ConfigError, match=r"text_config\.num_hidden_layers=1180591620717411303424"):
        for_config_class({"model_type": "gemma3", "text_config": {**GEMMA3, "num_hidden_layers": 2**70}})


def test_labels_are_left_out_everywhere_and_the_rest_kept() -> None:
    config = {**GEMMA3, "num_labels": 2**70, "id2label": {"0": "a"}, "text_config": {"label2id": {"a": 0}, "x": 1}}
    kept = for_config_class(config)
    assert kept == {**GEMMA3, "text_config": {"x": 1}}
    assert read_config({**GEMMA3, "num_labels": 2**70}).get("num_hidden_layers") == 4
