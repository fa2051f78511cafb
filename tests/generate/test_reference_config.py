"""The reference against config.json: a rotary base transformers' config class replaces (DBRX's released configs:
attn_config.rope_theta 500000, never read by transformers 5's DbrxRotaryEmbedding, which uses rope_parameters'
default 10000, while vLLM's DBRX reads attn_config.rope_theta) is a failed generate check naming both values;
configs whose class reads every written base pass silently (the sweep over every tiny family and ../shared/data's configs raised it for none)."""

from __future__ import annotations

import json
from pathlib import Path

from onboard.generate_adapter import generate
from onboard.generate_adapter.reference_config import REFERENCE_ROPE_BASE, rope_base_disagreement
from tests.generate.conftest import copy_tiny


def test_dbrx_released_config_rotary_base_is_flagged(tiny, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ckpt = copy_tiny(tiny, "dbrx", tmp_path)
    config = json.loads((ckpt / "config.json").read_text())
    assert config["attn_config"]["rope_theta"] == 500000.0
    # transformers' own save writes rope_parameters too (10000: the base it computes) beside attn_config's: vLLM's
    # DBRX reads attn_config.rope_theta, so this is flagged as well
    both = rope_base_disagreement(config)
    assert both is not None and "attn_config.rope_theta = 500000" in both
    del config["rope_parameters"]  # as databricks/dbrx-instruct's config.json: the base only in attn_config
    (ckpt / "config.json").write_text(json.dumps(config))
    result = generate(ckpt, tmp_path / "out", parity=True)
    (check,) = [c for c in result.checks if c.name == REFERENCE_ROPE_BASE]
    assert not check.passed and not check.required
    assert "DbrxConfig computes the rotary base 10000" in check.detail
    assert "attn_config.rope_theta = 500000" in check.detail
    # parity cannot see it: the adapter reads the config as transformers does
    assert result.parity is not None and result.parity["passed"]


def test_a_base_transformers_reads_raises_nothing(tiny, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ckpt = copy_tiny(tiny, "llama", tmp_path)
    config = json.loads((ckpt / "config.json").read_text())
    config.pop("rope_parameters", None)
    config["rope_theta"] = 500000.0  # the legacy top-level key, which transformers 5 moves into rope_parameters
    (ckpt / "config.json").write_text(json.dumps(config))
    assert rope_base_disagreement(config) is None
    assert REFERENCE_ROPE_BASE not in {c.name for c in generate(ckpt, tmp_path / "out").checks}


def test_per_layer_type_bases_compare_the_full_attention_layers() -> None:
    config = {
        "model_type": "gemma3_text",
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "intermediate_size": 128,
        "vocab_size": 1000,
        "rope_parameters": {
            "full_attention": {"rope_type": "default", "rope_theta": 1e6},
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
        },
    }
    assert rope_base_disagreement(config) is None
    # a day-zero model_type has no transformers class: its repository's code is the reference, nothing to compare
    assert rope_base_disagreement({**config, "model_type": "brand_new_lm", "rope_theta": 5.0}) is None
