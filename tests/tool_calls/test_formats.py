"""onboard's native-format parsers on texts in every format (tests/tool_calls/cases.py), and the named errors for
calls that cannot be used."""

from __future__ import annotations

import json

import pytest

from onboard.errors import InputError
from onboard.tool_calls.errors import EmptyArguments, MalformedToolCall, ToolCallError, UnknownFormat, UnknownTool
from onboard.tool_calls.formats import FORMATS, parse_turn
from onboard.tool_calls.reasoning import reasoning_open
from onboard.tool_calls.turn import ParsedTurn, ToolCall, diff_turns
from tests.tool_calls.cases import FORMAT_CASES, SINGLE, TOOLS, TextCase, glm, hermes, text_cases

CASES = text_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_each_format_text_parses_into_the_turn_it_was_written_from(case: TextCase) -> None:
    opened = reasoning_open(case.prompt or "", case.reasoning)
    turn = parse_turn(case.format, case.text, TOOLS, reasoning=case.reasoning, reasoning_open=opened)
    assert diff_turns(case.expected, turn) == []


def test_every_format_has_cases_of_each_kind() -> None:
    kinds: dict[str, set[str]] = {}
    for case in CASES:
        kinds.setdefault(case.format, set()).add(case.id.rsplit(":", 1)[1])
    assert set(kinds) == set(FORMATS)
    for fmt, seen in kinds.items():
        assert {"single", "nested_unicode", "no_call"} <= seen, fmt
    assert {f for f, seen in kinds.items() if "parallel" in seen} == set(FORMATS) - {"harmony"}


@pytest.mark.parametrize("fc", FORMAT_CASES, ids=lambda fc: f"{fc.format}:{fc.writer.__name__}")
def test_a_call_to_a_tool_that_was_not_offered_is_named(fc) -> None:
    others = [t for t in TOOLS if t["function"]["name"] != "get_weather"]
    with pytest.raises(UnknownTool) as info:
        parse_turn(fc.format, fc.writer(SINGLE), others)
    assert info.value.name == "get_weather" and info.value.call == 0
    assert "get_weather" in info.value.message and "create_event" in info.value.message and info.value.hint


BROKEN = {
    "hermes: arguments cut short": ("hermes", '<tool_call>\n{"name": "get_weather", "arguments": {"city": }\n</tool_call>'),
    "hermes: no name": ("hermes", '<tool_call>\n{"arguments": {"city": "Paris"}}\n</tool_call>'),
    "hermes: no arguments key": ("hermes", '<tool_call>\n{"name": "get_weather"}\n</tool_call>'),
    "hermes: arguments a string": ("hermes", '<tool_call>\n{"name": "get_weather", "arguments": "Paris"}\n</tool_call>'),
    "llama3: cut short": ("llama3_json", '{"name": "get_weather", "parameters": {"city": "Paris"'),
    "mistral: marker then text": ("mistral", "[TOOL_CALLS]get the weather"),
    "mistral: v11 args not JSON": ("mistral", "[TOOL_CALLS]get_weather[ARGS]{city: Paris}"),
    "deepseek_v3: no fence": ("deepseek_v3", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>"
                                             'get_weather {"city": "Paris"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>'),
    "deepseek_v31: unterminated": ("deepseek_v31", '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>'
                                                   '{"city": "Paris"}'),
    "kimi_k2: no argument marker": ("kimi_k2", "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
                                               '{"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|>'),
    "glm: no name": ("glm", "<tool_call><arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>"),
    "glm: unterminated": ("glm", "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>"),
    "harmony: arguments not JSON": ("harmony", "<|channel|>commentary to=functions.get_weather <|constrain|>json"
                                               "<|message|>{city: Paris}<|call|>"),
}  # fmt: skip


@pytest.mark.parametrize("name", BROKEN)
def test_a_call_that_cannot_be_read_is_a_named_error_with_a_hint(name: str) -> None:
    fmt, text = BROKEN[name]
    with pytest.raises(MalformedToolCall) as info:
        parse_turn(fmt, text, TOOLS)
    assert isinstance(info.value, InputError) and info.value.call == 0
    assert "tool call 0" in info.value.message and info.value.hint


def test_an_empty_arguments_string_is_its_own_error() -> None:
    text = "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|><|call|>"
    with pytest.raises(EmptyArguments) as info:
        parse_turn("harmony", text, TOOLS)
    assert info.value.name == "get_weather" and '"{}"' in info.value.hint
    assert isinstance(info.value, ToolCallError)


def test_an_unknown_format_names_the_known_ones() -> None:
    with pytest.raises(UnknownFormat) as info:
        parse_turn("pythonic", "[get_weather(city='Paris')]")
    assert "hermes" in info.value.hint and "glm" in info.value.hint


def test_without_tools_any_function_name_is_accepted_but_json_is_still_checked() -> None:
    turn = parse_turn("hermes", hermes([("anything", {"a": 1})]))
    assert turn.tool_calls == (ToolCall("anything", '{"a": 1}'),)
    with pytest.raises(MalformedToolCall):
        parse_turn("hermes", '<tool_call>{"name": "anything", "arguments": [1]}</tool_call>')


def test_llama3_json_content_that_is_json_without_a_name_stays_content() -> None:
    turn = parse_turn("llama3_json", '{"answer": 42}', TOOLS)
    assert not turn.called and turn.content == '{"answer": 42}'
    builtin = "<|python_tag|>brave_search.call(query='Paris')"  # a built-in tool in Python: not a function call
    assert parse_turn("llama3_json", builtin, TOOLS) == ParsedTurn(builtin)


def test_hermes_reads_an_unclosed_last_block_to_the_end_as_vllm_does() -> None:
    turn = parse_turn("hermes", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}', TOOLS)
    assert turn.tool_calls == (ToolCall("get_weather", '{"city": "Paris"}'),)


def test_glm_values_follow_the_tool_schema() -> None:
    text = glm([("create_event", {"title": "42", "when": {"date": "2025-01-01"}, "minutes": 30, "attendees": ["Ana"]})])
    tools = [{"type": "function", "function": {"name": "create_event", "parameters": {"type": "object", "properties": {
        "title": {"type": "string"}, "when": {"type": "object"}, "minutes": {"type": "integer"},
        "attendees": {"type": "array"}}}}}]  # fmt: skip
    args = json.loads(parse_turn("glm", text, tools).tool_calls[0].arguments)
    assert args == {"title": "42", "when": {"date": "2025-01-01"}, "minutes": 30, "attendees": ["Ana"]}
    untyped = [{"type": "function", "function": {"name": "create_event"}}]
    args = json.loads(parse_turn("glm", text, untyped).tool_calls[0].arguments)
    assert args == {"title": "42", "when": '{"date": "2025-01-01"}', "minutes": "30", "attendees": '["Ana"]'}
    wrong = [{"type": "function", "function": {"name": "create_event", "parameters": {"properties": {
        "minutes": {"type": "boolean"}, "title": {"enum": [1, 2]}}}}}]  # fmt: skip
    args = json.loads(parse_turn("glm", text, wrong).tool_calls[0].arguments)
    assert args["minutes"] == "30" and args["title"] == 42  # 30 is no boolean; whether 42 is allowed is the schema's job


def test_mistral_v11_history_call_ids_are_skipped() -> None:
    turn = parse_turn("mistral", '[TOOL_CALLS]get_weather[CALL_ID]abcDEF123[ARGS]{"city": "Paris"}', TOOLS)
    assert turn.tool_calls == (ToolCall("get_weather", '{"city": "Paris"}'),)


def test_harmony_ignores_builtin_tools_and_keeps_commentary_preambles_as_content() -> None:
    text = ("<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>commentary<|message|>Checking."
            "<|end|><|start|>assistant to=browser.search<|channel|>analysis<|message|>{\"query\": \"x\"}<|call|>"
            "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Paris\"}"
            "<|call|>")  # fmt: skip
    turn = parse_turn("harmony", text, TOOLS)
    assert turn.reasoning_content == "Think." and turn.content == "Checking."
    assert turn.tool_calls == (ToolCall("get_weather", '{"city": "Paris"}'),)
