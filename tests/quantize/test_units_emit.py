"""Units found by name in transformers models and generated adapters, and the engine-ready files of a plan."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from onboard.quantize import emit
from onboard.quantize.units import find_units
from onboard.validate_serving.runtime import load_candidate


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from tests.tiny.factory import make_tiny_checkpoint

    root = tmp_path_factory.mktemp("quantize-tiny")
    return {mt: make_tiny_checkpoint(mt, root / mt) for mt in ("qwen3", "qwen2_moe")}


@pytest.mark.parametrize("runtime", ["adapter", "reference"])
def test_units_of_a_moe_model_with_shared_experts(tiny, runtime: str) -> None:  # type: ignore[no-untyped-def]
    model = load_candidate(tiny["qwen2_moe"], "float32", runtime=runtime).model
    units, kept = find_units(model)
    names = [u.name for u in units]
    blocks = ("attn.qkv", "attn.o", "experts.gate_up", "experts.down", "shared_experts.gate_up", "shared_experts.down")
    assert names == ["embedding", *(f"layer.{i}.{b}" for i in range(2) for b in blocks), "head"]
    experts = units[3].tensors + units[4].tensors
    assert all(t.param.ndim == 3 for t in experts)  # routers (mlp.gate, shared_expert_gate) are not in any unit
    assert all("down" in t.name for t in units[4].tensors) and not any("down" in t.name for t in units[3].tensors)
    assert [t.name.rsplit(".", 2)[-2] for t in units[2].tensors] == ["o_proj"]
    assert not any("gate.weight" in t.name and "gate_proj" not in t.name for u in units for t in u.tensors)
    total = sum(p.numel() for p in model.parameters())
    assert sum(u.elements for u in units) + kept == total


def test_tied_embedding_is_one_unit_with_the_head(tmp_path: Path) -> None:
    from tests.tiny.factory import make_tiny_checkpoint

    path = make_tiny_checkpoint("qwen3", tmp_path / "tied", overrides={"tie_word_embeddings": True})
    for runtime in ("adapter", "reference"):
        units, _ = find_units(load_candidate(path, "float32", runtime=runtime).model)
        assert units[0].name == "embedding+head" and units[-1].kind != "head"


def _gguf_names(layers: int) -> list[str]:
    per_layer = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps",
                 "ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp", "ffn_gate_inp", "attn_norm")  # fmt: skip
    return [f"blk.{i}.{n}.weight" for i in range(layers) for n in per_layer]


def test_llama_quantize_overrides_cover_each_tensor_once(tiny) -> None:  # type: ignore[no-untyped-def]
    units = emit.tensors_by_unit(emit.checkpoint_tensors(tiny["qwen2_moe"]))
    plan = {"embedding": "q8_0", "layer.0.attn.qkv": "q4_k", "layer.0.attn.o": "q4_k", "layer.0.experts.gate_up": "q6_k",
            "layer.0.experts.down": "q6_k", "layer.0.shared_experts.gate_up": "bf16",
            "layer.0.shared_experts.down": "q4_1", "layer.1.attn.qkv": "mxfp4", "layer.1.attn.o": "mxfp4",
            "layer.1.experts.gate_up": "q4_k", "layer.1.experts.down": "q4_k", "layer.1.shared_experts.gate_up": "q8_0",
            "layer.1.shared_experts.down": "q8_0", "head": "q6_k"}  # fmt: skip
    form = emit.llama_cpp(plan, units, "tiny")
    words = shlex.split(form.text.replace("\\\n", " ").split("llama-quantize", 1)[1].split("\n")[0])
    overrides = [words[i + 1] for i, w in enumerate(words) if w == "--tensor-type"]
    assert words[words.index("--token-embedding-type") + 1] == "q8_0"
    assert words[words.index("--output-tensor-type") + 1] == "q8_0"  # Q6_K on rows of 64: llama.cpp's fallback
    rules = [(re.compile(o.rsplit("=", 1)[0].lower()), o.rsplit("=", 1)[1]) for o in overrides]
    expected = {
        "attn_q": "q5_0",
        "attn_output": "q5_0",
        "ffn_down_exps": "q8_0",
        "ffn_gate_shexp": "bf16",
        "ffn_up_shexp": "bf16",
        "ffn_down_shexp": "q4_1",
    }  # the shared experts' down_proj: its own unit
    for name in _gguf_names(2):
        hits = [t for pattern, t in rules if pattern.search(name)]
        base = name.split(".")[2]
        if base in ("ffn_gate_inp", "attn_norm"):
            assert hits == []  # the router and norms stay as converted
            continue
        assert len(hits) == 1, (name, hits)
        if name.startswith("blk.0.") and base in expected:
            assert hits[0] == expected[base]
        if name.startswith("blk.1.attn"):
            assert hits[0] == "mxfp4"
    assert form.unsupported == [] and form.unmapped == []


def test_llm_compressor_recipe_targets_and_ignores(tiny) -> None:  # type: ignore[no-untyped-def]
    units = emit.tensors_by_unit(emit.checkpoint_tensors(tiny["qwen3"]))
    plan = {"embedding": "bf16", "layer.0.attn.qkv": "int8", "layer.0.attn.o": "int8", "layer.0.mlp.gate_up": "bf16",
            "layer.0.mlp.down": "bf16", "layer.1.attn.qkv": "fp8-block", "layer.1.attn.o": "fp8-block",
            "layer.1.mlp.gate_up": "q4_k", "layer.1.mlp.down": "int8", "head": "bf16"}  # fmt: skip
    form = emit.llm_compressor(plan, units, "tiny")
    assert form.unsupported == ["layer.1.mlp.gate_up"]  # a llama.cpp format: vLLM would run it unquantized
    recipe = yaml.safe_load(form.text)["quant_stage"]["quant_modifiers"]["QuantizationModifier"]
    modules = [n.removesuffix(".weight") for names in units.values() for n, _ in names]

    def matched(pattern: str) -> set[str]:
        return {m for m in modules if (re.fullmatch(pattern[3:], m) if pattern.startswith("re:") else m == pattern)}

    ignored = set().union(*(matched(p) for p in recipe["ignore"]))
    assert {"lm_head", "model.layers.0.mlp.down_proj", "model.layers.1.mlp.up_proj"} <= ignored
    groups = {g["weights"]["strategy"]: matched(g["targets"][0]) for g in recipe["config_groups"].values()}
    assert "model.layers.1.mlp.down_proj" not in ignored and "model.layers.1.mlp.gate_proj" in ignored
    channel = {f"model.layers.0.self_attn.{p}_proj" for p in "qkvo"} | {"model.layers.1.mlp.down_proj"}
    assert groups["channel"] == channel
    assert groups["block"] == {f"model.layers.1.self_attn.{p}_proj" for p in "qkvo"}
    assert not ignored & (groups["channel"] | groups["block"])


def test_a_wrappers_plan_covers_its_language_model_under_either_layout(tmp_path: Path) -> None:
    # LLaVA: the language model stored as language_model.model.layers.{i}…, a CLIP tower whose encoder layers also
    # read `layers.0.self_attn.q_proj`. The tower is in no unit (units of the loaded model, checkpoint tensors of the
    # recipe), and the recipe's targets match the language model's modules as stored and as transformers 5 loads
    # them (model.language_model.layers.{i}…), never the tower's.
    from tests.tiny.factory import make_tiny_checkpoint

    path = make_tiny_checkpoint("llava", tmp_path / "llava")
    units, kept = find_units(load_candidate(path, "float32", runtime="reference").model)
    assert not [t.name for u in units for t in u.tensors if "vision_tower" in t.name or "projector" in t.name]
    assert [u.name for u in units][:3] == ["embedding", "layer.0.attn.qkv", "layer.0.attn.o"] and kept > 0
    by_unit = emit.tensors_by_unit(emit.checkpoint_tensors(path))
    assert not [n for names in by_unit.values() for n, _ in names if n.startswith(("vision_tower", "multi_modal"))]
    plan = {name: "int8" for name in by_unit} | {"embedding": "bf16"}
    recipe = yaml.safe_load(emit.llm_compressor(plan, by_unit, "tiny").text)["quant_stage"]["quant_modifiers"]
    target = re.compile(recipe["QuantizationModifier"]["config_groups"]["group_0"]["targets"][0][3:])
    for loaded in ("language_model.model.layers.0.mlp.down_proj", "model.language_model.layers.0.mlp.down_proj",
                   "lm_head"):  # fmt: skip
        assert target.fullmatch(loaded), loaded
    assert not target.fullmatch("vision_tower.vision_model.encoder.layers.0.mlp.fc2")
    assert not target.fullmatch("model.vision_tower.vision_model.encoder.layers.0.self_attn.q_proj")
