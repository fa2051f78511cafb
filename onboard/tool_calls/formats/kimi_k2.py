"""Kimi K2: `<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{...}
<|tool_call_end|>…<|tool_calls_section_end|>`. The header is Kimi's call id; the name is the part before `:N`
without the `functions.` prefix. Content is the text before the section."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from onboard.tool_calls.errors import MalformedToolCall
from onboard.tool_calls.formats.common import call_blocks, dumps, load_json, unterminated
from onboard.tool_calls.turn import ToolCall

SECTION_BEGIN, SECTION_END = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
CALL_BEGIN, ARGUMENTS, CALL_END = "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"


def extract(text: str, tools: Sequence[Mapping[str, Any]] = ()) -> tuple[str, list[ToolCall]]:
    content, blocks = call_blocks(text, SECTION_BEGIN, CALL_BEGIN, CALL_END, SECTION_END)
    calls: list[ToolCall] = []
    for block, closed in blocks:
        header, sep, arguments = block.partition(ARGUMENTS)
        name = header.strip().split(":")[0].removeprefix("functions.")
        if not sep or not name:
            raise MalformedToolCall(
                f"tool call {len(calls)}: expected functions.NAME:N{ARGUMENTS}{{...}}, got {block[:200]!r}",
                "Kimi K2 calls read <|tool_call_begin|>functions.NAME:N"
                "<|tool_call_argument_begin|>{...}<|tool_call_end|>",
                call=len(calls),
            )
        if not closed:
            raise unterminated(len(calls), name, CALL_END)
        calls.append(ToolCall(name, dumps(load_json(arguments, len(calls), "the arguments"))))
    return content, calls
