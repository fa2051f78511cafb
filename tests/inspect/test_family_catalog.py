"""onboard/data/families.json against what inspect derives today: a catalog built by an older analysis makes a
checkpoint of a known family look new to it (features or tensors the family's entry lacks). A sample of families
covering the analysis' parts is rebuilt here, as scripts/build_family_catalog.py builds every entry."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SAMPLE = ["llama", "qwen3", "gemma2", "olmo", "cohere2_moe", "deepseek_v3", "qwen3_5_text", "minicpm3", "mamba",
          "mamba2", "jamba", "nemotron_h", "bamba", "granitemoehybrid", "llama4_text", "gpt_oss", "lfm2", "mixtral",
          "cohere"]  # fmt: skip


@pytest.fixture(scope="module")
def build():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("build_family_catalog", REPO / "scripts" / "build_family_catalog.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


@pytest.mark.parametrize("model_type", SAMPLE)
def test_catalog_entry_is_what_inspect_derives_today(build, model_type: str) -> None:  # type: ignore[no-untyped-def]
    catalog = json.loads((REPO / "onboard" / "data" / "families.json").read_text())["families"]
    assert build.entry(model_type) == catalog[model_type], (
        f"onboard/data/families.json is stale for {model_type}: rebuild it with "
        ".venv/bin/python scripts/build_family_catalog.py"
    )


def test_entries_list_the_names_checkpoints_store() -> None:
    # Saved names (save_pretrained reverts transformers 5's load-time conversions: Mixtral's per-expert w1/w2/w3 under
    # block_sparse_moe), the names in memory, and the optional parts the tiny config turns on (Cohere's QK norms).
    catalog = json.loads((REPO / "onboard" / "data" / "families.json").read_text())["families"]
    mixtral = set(catalog["mixtral"]["tensor_templates"])
    assert {"model.layers.{}.block_sparse_moe.experts.{}.w1.weight", "model.layers.{}.mlp.experts.gate_up_proj"} <= mixtral
    assert "model.layers.{}.self_attn.q_norm.weight" in catalog["cohere"]["tensor_templates"]


def test_hybrid_families_list_their_attention_tensors(build) -> None:  # type: ignore[no-untyped-def]
    # Bamba's and Granite-4.0's default configs have no attention layer: their entries come from the tiny configs
    catalog = json.loads((REPO / "onboard" / "data" / "families.json").read_text())["families"]
    for model_type in build.PARTIAL_DEFAULTS:
        assert "model.layers.{}.self_attn.q_proj.weight" in catalog[model_type]["tensor_templates"], model_type
