"""The conformance suite: what it covers, its renderings through a model's chat template (deterministic,
JSON-serialisable), and the expected answers written by real templates of each format read back by our parsers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from onboard import serde
from onboard.errors import InputError
from onboard.tool_calls import suite
from onboard.tool_calls.arguments import check_call
from onboard.tool_calls.detect import recognise_format, recognise_reasoning
from onboard.tool_calls.formats import parse_turn
from onboard.tool_calls.turn import diff_turns

REPO = Path(__file__).resolve().parents[2]
QWEN3 = REPO / "tests" / "fixtures" / "trained-qwen3"
BY_NAME = {c.name: c for c in suite.CONVERSATIONS}


@pytest.fixture(scope="module")
def tokenizer():
    return suite.load_tokenizer(QWEN3)


def _non_ascii(value: object) -> bool:
    return any(ord(ch) > 127 for ch in json.dumps(value, ensure_ascii=False))


def test_the_suite_covers_what_agentic_use_depends_on() -> None:
    kinds = {c.name: c.expected for c in suite.CONVERSATIONS}
    assert len(kinds["single_call"].tool_calls) == 1 and len(kinds["parallel_calls"].tool_calls) == 2
    nested = json.loads(kinds["nested_arguments"].tool_calls[0].arguments)
    assert any(isinstance(v, dict) for v in nested.values()) and any(isinstance(v, list) for v in nested.values())
    assert _non_ascii(json.loads(kinds["unicode_arguments"].tool_calls[0].arguments))
    assert not kinds["no_call"].called and kinds["no_call"].content
    after = BY_NAME["after_tool_result"]
    assert after.messages[-1]["role"] == "tool" and not after.expected.called
    assert [m["role"] for m in after.messages] == ["user", "assistant", "tool"]
    for conversation in suite.CONVERSATIONS:
        for i, call in enumerate(conversation.expected.tool_calls):
            assert check_call(call, conversation.tools, i) == [], conversation.name


def test_renderings_are_deterministic_and_json_serialisable(tokenizer) -> None:
    for conversation in suite.CONVERSATIONS:
        first, again = suite.render(tokenizer, conversation), suite.render(tokenizer, conversation)
        assert first == again
        assert serde.from_dict(suite.Rendered, json.loads(serde.to_json(first))) == first
        assert list(first.prompt_ids) == tokenizer(first.prompt, add_special_tokens=False)["input_ids"]
        assert serde.from_dict(suite.Conversation, json.loads(serde.to_json(conversation))) == conversation


def test_the_prompt_offers_the_tools_in_the_templates_own_words(tokenizer) -> None:
    rendered = suite.render(tokenizer, BY_NAME["single_call"], reasoning="think")
    assert rendered.prompt.count('"name": "get_weather"') == 1 and '"name": "create_event"' in rendered.prompt
    assert "<tools>" in rendered.prompt and rendered.prompt.endswith("<|im_start|>assistant\n")
    assert not rendered.reasoning_open
    closed = suite.render(tokenizer, BY_NAME["single_call"], reasoning="think", enable_thinking=False)
    assert closed.prompt.endswith("<think>\n\n</think>\n\n") and not closed.reasoning_open
    after = suite.render(tokenizer, BY_NAME["after_tool_result"]).prompt
    assert "<tool_response>\n" + BY_NAME["after_tool_result"].messages[-1]["content"] in after


def test_each_expected_answer_written_by_qwen3s_template_reads_back(tokenizer) -> None:
    fmt, style = recognise_format(tokenizer.chat_template), recognise_reasoning(tokenizer.chat_template)
    assert (fmt.name, style.name) == ("hermes", "think")
    for conversation in suite.CONVERSATIONS:
        text = suite.answer_text(tokenizer, conversation, conversation.expected, reasoning="I check.")
        assert text.endswith("<|im_end|>")
        turn = parse_turn("hermes", text.removesuffix("<|im_end|>"), conversation.tools, reasoning="think")
        assert diff_turns(conversation.expected, turn, reasoning=False) == [], conversation.name
        assert turn.reasoning_content == "I check."


TEMPLATES = {  # one real template per format (../shared/data), with the conversations it cannot write
    "llama3/llama-3.2-3b-instruct_hf-mirror/tokenizer_config.json": {"parallel_calls": "refused"},
    "llamacpp/templates/mistralai-Mistral-Nemo-Instruct-2407.jinja": {},
    "mistral/mistral-common/chat_templates/v13.jinja": {},
    "gpt-oss/gpt-oss-20b_hf-mirror/chat_template.jinja": {"parallel_calls": "first call only"},  # one per message
    "llamacpp/templates/deepseek-ai-DeepSeek-V3.1.jinja": {},
    "deepseek/deepseek-r1_hf-mirror/tokenizer_config.json": {},
    "llamacpp/templates/moonshotai-Kimi-K2.jinja": {},
    "llamacpp/templates/GLM-4.6.jinja": {},
}
END_OF_TURN = ("<|eot_id|>", "<|eom_id|>", "</s>", "<|return|>", "<|call|>", "<|end|>", "<｜end▁of▁sentence｜>",
               "<|im_end|>", "<|user|>")  # fmt: skip


def _template(shared_data: Path, name: str) -> str:
    path = shared_data / name
    if path.name == "tokenizer_config.json":
        return json.loads(path.read_text(encoding="utf-8"))["chat_template"]
    return path.read_text(encoding="utf-8")


@pytest.mark.parametrize("name", TEMPLATES)
def test_the_suite_renders_through_real_templates_and_their_answers_read_back(
    shared_data: Path, tmp_path: Path, name: str
) -> None:
    """The fixture's tokenizer wearing another model's chat template: transformers renders the suite in that
    model's tool format, and the recognised format's parser reads the template's own answer back."""
    folder = tmp_path / "tok"
    shutil.copytree(QWEN3, folder, ignore=shutil.ignore_patterns("*.safetensors", "*.gz"))
    tokenizer = suite.load_tokenizer(folder)
    tokenizer.chat_template = _template(shared_data, name)
    fmt = recognise_format(tokenizer.chat_template).name
    style = recognise_reasoning(tokenizer.chat_template)
    style = style.name if style and fmt != "harmony" else None
    for conversation in suite.CONVERSATIONS:
        limit = TEMPLATES[name].get(conversation.name)
        if limit == "refused":
            with pytest.raises(InputError, match=conversation.name):
                suite.answer_text(tokenizer, conversation, conversation.expected)
            continue
        rendered = suite.render(tokenizer, conversation, reasoning=style)
        assert rendered.prompt and rendered.prompt_ids
        text = suite.answer_text(tokenizer, conversation, conversation.expected)
        cut = min([at for end in END_OF_TURN if (at := text.find(end)) > 0] or [len(text)])
        turn = parse_turn(fmt, text[:cut], conversation.tools, reasoning=style, reasoning_open=rendered.reasoning_open)
        differences = diff_turns(conversation.expected, turn, reasoning=False)
        if limit == "first call only":
            assert turn.tool_calls == conversation.expected.tool_calls[:1], text
        else:
            assert differences == [], (conversation.name, text)


def test_a_template_that_cannot_render_tools_is_an_input_error(tokenizer, tmp_path: Path) -> None:
    folder = tmp_path / "tok"
    shutil.copytree(QWEN3, folder, ignore=shutil.ignore_patterns("*.safetensors", "*.gz"))
    broken = suite.load_tokenizer(folder)
    broken.chat_template = "{% if tools %}{{ raise_exception('tools are not supported') }}{% endif %}"
    with pytest.raises(InputError, match="cannot render conversation 'single_call' with tools") as info:
        suite.render(broken, BY_NAME["single_call"])
    assert "tools are not supported" in info.value.message and info.value.hint
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config.pop("chat_template")
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    with pytest.raises(InputError, match="has no chat template"):
        suite.load_tokenizer(folder)
    with pytest.raises(InputError, match="cannot load the tokenizer"):
        suite.load_tokenizer(tmp_path / "missing")
