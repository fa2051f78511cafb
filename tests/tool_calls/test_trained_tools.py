"""The tool-calling fixture (tests/fixtures/trained-qwen3-tools, `scripts/train_tiny_reference.py --tools`): under
transformers' greedy decoding in float32, its answer to every conversation of the suite parses with our Hermes parser
into the expected calls (names and arguments) or the expected content, the turns that must not call call nothing,
and the reasoning stands apart from the content."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from onboard.tool_calls import suite
from onboard.tool_calls.detect import recognise_format, recognise_reasoning

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "train_tiny_reference.py"
FIXTURE = REPO / "tests" / "fixtures" / "trained-qwen3-tools"
REFERENCE = REPO / "tests" / "fixtures" / "trained-qwen3"
SAME_AS_REFERENCE = ("vocab.json", "merges.txt", "tokenizer_config.json", "added_tokens.json",
                     "special_tokens_map.json", "generation_config.json")  # fmt: skip


def _script():
    spec = importlib.util.spec_from_file_location("train_tiny_reference", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def answers() -> dict[str, dict]:
    import torch
    from transformers import AutoModelForCausalLM

    tokenizer = suite.load_tokenizer(FIXTURE)
    model = AutoModelForCausalLM.from_pretrained(FIXTURE, dtype=torch.float32, trust_remote_code=False).eval()
    return {a["name"]: a for a in _script().answer_suite(model, tokenizer)}


@pytest.mark.slow
@pytest.mark.parametrize("conversation", suite.CONVERSATIONS, ids=lambda c: c.name)
def test_the_fixture_answers_each_suite_conversation_as_expected(answers, conversation) -> None:
    answer = answers[conversation.name]
    assert answer["ended"], answer["raw"]  # stopped at <|im_end|>, not at max_new_tokens
    assert answer["differences"] == [], answer["raw"]
    parsed = answer["parsed"]
    assert bool(parsed.get("tool_calls")) == conversation.expected.called
    assert parsed.get("reasoning_content")  # Qwen3's template asks for a <think> block: it is there, and apart
    for marker in ("<think>", "</think>", "<tool_call>", "</tool_call>", "<|im_end|>"):
        assert marker not in (parsed["content"] or "") and marker not in parsed["reasoning_content"]


@pytest.mark.slow
def test_the_suite_has_the_kinds_the_fixture_must_reproduce(answers) -> None:
    calls = {name: len(a["parsed"].get("tool_calls") or []) for name, a in answers.items()}
    assert calls["single_call"] == 1 and calls["parallel_calls"] == 2
    assert calls["no_call"] == 0 and calls["after_tool_result"] == 0


def test_the_fixture_is_the_reference_with_other_weights() -> None:
    for name in SAME_AS_REFERENCE:
        assert (FIXTURE / name).read_bytes() == (REFERENCE / name).read_bytes(), name
    mine, theirs = (json.loads((d / "config.json").read_text()) for d in (FIXTURE, REFERENCE))
    for config in (mine, theirs):
        config.pop("transformers_version")
    assert mine == theirs
    template = json.loads((FIXTURE / "tokenizer_config.json").read_text())["chat_template"]
    assert (recognise_format(template).name, recognise_reasoning(template).name) == ("hermes", "think")
    assert not (FIXTURE / "corpus.txt.gz").exists()  # trained on the reference's copy


@pytest.mark.parametrize("name", ["model.safetensors", "PROVENANCE.md"])
def test_the_fixture_files_are_committed_small_and_described(name: str) -> None:
    size = (FIXTURE / name).stat().st_size
    assert 0 < size <= 9 * 1024 * 1024
    provenance = (FIXTURE / "PROVENANCE.md").read_text(encoding="utf-8")
    assert _script().sha256(FIXTURE / "model.safetensors") in provenance
    assert _script().sha256(REFERENCE / "model.safetensors") in provenance
    for conversation in suite.CONVERSATIONS:
        assert f"| {conversation.name} |" in provenance
