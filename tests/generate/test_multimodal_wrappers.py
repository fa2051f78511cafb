# ruff: noqa: F811  (pytest fixtures imported from tests.hubserver are used as parameters)
"""Multimodal wrappers (tests/tiny/tiny_wrappers.py: Gemma 3 / 4, Llama 4, Mistral 3, LLaVA, the Qwen-VL families,
Qwen3.5, Kimi K2.5): the adapter serves the language model, read from the wrapper's checkpoint under its text names,
with the towers left out and reported unverified.

The float32 parity of each composition is in the coverage table (test_compose_coverage.py); here: bfloat16 parity,
the hand-written families' adapters on their wrappers, the loader's view of a wrapper, the head-tying rule, the
config lint of a wrapper's own keys, and generate's tower check.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from onboard.generate_adapter import generate
from onboard.generate_adapter.adapter_source import adapter_source
from onboard.generate_adapter.loader import WeightsError, checkpoint_index, language_model_index
from onboard.generate_adapter.parity import check_parity
from onboard.generate_adapter.plan import plan
from onboard.inspect_checkpoint import inspect
from onboard.inspect_checkpoint.config_view import language_model_config, tie_word_embeddings
from tests.generate.conftest import within_tolerance
from tests.hubserver import hub_env, hub_server  # noqa: F401  (fixtures)
from tests.tiny.tiny_wrappers import ALL_WRAPPERS

# Wrappers whose language model is a committed family: its committed adapter (adapters/) must read the wrapper too.
REGISTERED_TEXT = {"gemma3": "gemma3_text", "mistral3": "mistral", "llava": "llama"}


@pytest.fixture(scope="module")
def wrapper(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from tests.tiny.factory import make_tiny_checkpoint

    root, built = tmp_path_factory.mktemp("wrappers"), {}

    def get(model_type: str) -> Path:
        if model_type not in built:
            built[model_type] = make_tiny_checkpoint(model_type, root / model_type)
        return built[model_type]

    return get


def _adapter(checkpoint: Path, out: Path) -> tuple[Path, object]:
    the_plan = plan(inspect(str(checkpoint)))
    assert not the_plan.stubs, the_plan.stubs
    path = out / f"{the_plan.model_type}.py"
    path.write_text(adapter_source(the_plan))
    return path, the_plan


@pytest.mark.parametrize("model_type", ALL_WRAPPERS)
def test_wrapper_profile_names_its_towers_and_lints_clean(model_type: str, wrapper) -> None:  # type: ignore[no-untyped-def]
    profile = inspect(str(wrapper(model_type)))
    assert "multimodal" in profile.features and "vision" in profile.multimodal
    assert (
        profile.model_type == json.loads((wrapper(model_type) / "config.json").read_text())["text_config"]["model_type"]
    )
    # The wrapper's own keys are one info finding, never an unknown-field warning (the language model's own keys
    # are linted as in its text-only checkpoint: test_tiny_architectures)
    top = [f.message for f in profile.findings if f.code.startswith("config-") and "_config." not in f.message]
    assert not top, top


# The reference cannot judge these two on text (their coverage rows say why): BLIP-2's forward requires pixel_values;
# transformers' Cohere2Vision drops the language model's logit_scale.
NO_TEXT_REFERENCE = {"blip-2", "cohere2_vision"}


@pytest.mark.parametrize("model_type", [m for m in ALL_WRAPPERS if m not in NO_TEXT_REFERENCE])
def test_composed_adapter_of_a_wrapper_passes_parity_in_bf16(model_type: str, wrapper, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    adapter, _ = _adapter(wrapper(model_type), tmp_path)
    report = check_parity(adapter, wrapper(model_type), "bfloat16")
    assert within_tolerance(report), report["detail"]


@pytest.mark.parametrize("model_type", sorted(REGISTERED_TEXT))
def test_novelty_compares_the_language_model_and_names_the_tower(model_type: str, wrapper) -> None:  # type: ignore[no-untyped-def]
    profile = inspect(str(wrapper(model_type)))
    assert profile.closest_family == REGISTERED_TEXT[model_type]
    assert not [line for line in profile.novelty if "tensors not in" in line], profile.novelty  # towers not counted
    assert any(line.startswith("vision tower(s) beside the language model") for line in profile.novelty)


@pytest.mark.parametrize("model_type", sorted(REGISTERED_TEXT))
def test_committed_adapter_of_the_language_model_reads_the_wrapper(model_type: str, wrapper) -> None:  # type: ignore[no-untyped-def]
    from onboard.generate_adapter.families import ADAPTERS_DIR

    report = check_parity(ADAPTERS_DIR / f"{REGISTERED_TEXT[model_type]}.py", wrapper(model_type), "float32")
    assert report["passed"], report["detail"]


def test_loader_reads_the_language_model_under_text_names_and_counts_the_tower(wrapper) -> None:  # type: ignore[no-untyped-def]
    checkpoint = wrapper("llava")
    stored_index = checkpoint_index(checkpoint)
    index, stored, towers = language_model_index(checkpoint, stored_index)
    assert stored["model.layers.0.self_attn.q_proj.weight"] == "language_model.model.layers.0.self_attn.q_proj.weight"
    assert stored["lm_head.weight"] == "language_model.lm_head.weight"
    assert towers == sum(name.startswith(("vision_tower.", "multi_modal_projector.")) for name in stored_index) > 0
    assert len(index) + towers == len(stored_index)
    text = {name: path for name, path in stored_index.items() if name.startswith("model.")}
    assert language_model_index(checkpoint, text) == (text, {n: n for n in text}, 0)  # a text checkpoint: unchanged


def test_loader_refuses_a_language_model_stored_twice(wrapper, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    index = checkpoint_index(wrapper("llava"))
    index["model.norm.weight"] = index["language_model.model.norm.weight"]  # the same tensor under both names
    with pytest.raises(WeightsError, match=r"language_model\.model\.norm\.weight and model\.norm\.weight"):
        language_model_index(tmp_path, index)


@pytest.mark.parametrize(
    ("top", "text", "tied"),
    [(True, False, True), (False, True, True), (None, True, True), (False, False, False), (None, None, None)],
)
def test_a_wrapper_ties_its_head_by_either_flag(top: bool | None, text: bool | None, tied: bool | None) -> None:
    config = {
        "text_config": {"hidden_size": 64, **({} if text is None else {"tie_word_embeddings": text})},
        **({} if top is None else {"tie_word_embeddings": top}),
    }
    assert tie_word_embeddings(config) is tied
    assert language_model_config(config).get("tie_word_embeddings") == tied


def test_mistral3_head_tied_by_the_wrapper_flag_is_load_bearing(wrapper, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # Mistral3Config ties by default while its text config does not: transformers ties the wrapper's head, so no
    # lm_head is saved. Read the text config's flag alone and the adapter has an LM head nothing fills.
    checkpoint = shutil.copytree(wrapper("mistral3"), tmp_path / "mistral3")
    config = json.loads((checkpoint / "config.json").read_text())
    assert config["tie_word_embeddings"] is True and config["text_config"]["tie_word_embeddings"] is False
    adapter, _ = _adapter(checkpoint, tmp_path)
    assert check_parity(adapter, checkpoint, "float32")["passed"]
    config["tie_word_embeddings"] = False  # now the checkpoint says untied, and stores no head
    (checkpoint / "config.json").write_text(json.dumps(config))
    report = check_parity(adapter, checkpoint, "float32")
    assert not report["passed"] and "lm_head.weight" in report["detail"], report["detail"]


def test_a_wrapper_top_level_keys_are_one_info_finding_and_a_text_models_are_warnings() -> None:
    from onboard.inspect_checkpoint.config_lint import comparable_keys, lint_config
    from onboard.inspect_checkpoint.config_view import ConfigView

    wrapper_config = {
        "model_type": "llava",
        "vision_feature_layer": -2,
        "image_grid_pinpoints": [[28, 28]],
        "image_token_index": 7,
        "text_config": {"hidden_size": 64, "new_text_knob": 3},
    }
    findings = lint_config(ConfigView(wrapper_config))
    assert [(f.code, f.severity) for f in findings if "vision_feature_layer" in f.message] == [
        ("wrapper-config-fields", "info")
    ]
    assert "image_grid_pinpoints" in findings[-1].message and "image_token_index" not in findings[-1].message
    # The language model's own unknown key is still a warning, named in its section.
    assert [f.code for f in findings if "text_config.new_text_knob" in f.message] == ["config-unknown-field"]
    assert "vision_feature_layer" not in comparable_keys(ConfigView(wrapper_config))  # not the model's novelty
    text_model = {"model_type": "newlm", "hidden_size": 64, "vision_feature_layer": -2}  # not a wrapper: a warning
    assert [f.code for f in lint_config(ConfigView(text_model)) if "vision_feature_layer" in f.message] == [
        "config-unknown-field"
    ]


def test_generate_reports_the_tower_inputs_unverified(wrapper, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    result = generate(str(wrapper("gemma3")), tmp_path / "out", parity=True)
    checks = {c.name: c for c in result.checks}
    tower = checks["tower_inputs"]
    assert not tower.passed and not tower.required and tower.detail.startswith("unverified")
    assert "vision" in tower.detail and "What would check them" in tower.detail
    assert result.passed and checks["adapter_parity"].passed  # the language model is checked, and passes
    text_only = generate(str(wrapper("gemma3")), tmp_path / "again", parity=False)
    assert "tower_inputs" in {c.name for c in text_only.checks}


def test_a_wrapper_on_the_hub_is_profiled_and_composed_from_its_headers(hub_env, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # A multimodal wrapper behind the loopback hub (headers by range requests, no weights): the same profile as the
    # local folder, and the same composed adapter, towers left out.
    from tests.tiny.factory import make_tiny_checkpoint

    ckpt = make_tiny_checkpoint("qwen3_vl", tmp_path / "qwen3_vl")
    hub_env.add_repo("acme/tiny-vl", ckpt)
    remote, local = inspect("acme/tiny-vl"), inspect(str(ckpt))
    for key in ("model_type", "dims", "layers", "features", "multimodal", "parameters", "closest_family"):
        assert getattr(remote, key) == getattr(local, key), key
    assert adapter_source(plan(remote)) == adapter_source(plan(local))


def test_the_vllm_launch_notes_say_what_was_verified(wrapper) -> None:  # type: ignore[no-untyped-def]
    from onboard.generate_adapter.engine_configs import engine_config

    notes = " ".join(engine_config(inspect(str(wrapper("gemma3"))), "vllm").notes)
    assert "vision tower" in notes and "--language-model-only" in notes
    text_only = inspect(str(Path(__file__).resolve().parents[2] / "examples" / "demo-qwen3"))
    assert "--language-model-only" not in " ".join(engine_config(text_only, "vllm").notes)
