"""DeepSeek's special-token calls, inside `<｜tool▁calls▁begin｜>…<｜tool▁calls▁end｜>`, one
`<｜tool▁call▁begin｜>…<｜tool▁call▁end｜>` block per call:

- V3 / R1 (`deepseek_v3`): `function<｜tool▁sep｜>NAME\\n```json\\n{...}\\n```` (type, name, fenced JSON);
- V3.1 (`deepseek_v31`): `NAME<｜tool▁sep｜>{...}`.

Content is the text before the calls.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from onboard.tool_calls.errors import MalformedToolCall
from onboard.tool_calls.formats.common import call_blocks, dumps, load_json, unterminated
from onboard.tool_calls.turn import ToolCall

CALLS_BEGIN, CALLS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CALL_BEGIN, CALL_END, SEP = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"
_FENCED = re.compile(r"\s*(?P<name>[^\n]*)\n```(?:json)?\n(?P<args>.*)\n```\s*$", re.DOTALL)


def extract_v3(text: str, tools: Sequence[Mapping[str, Any]] = ()) -> tuple[str, list[ToolCall]]:
    def call(index: int, head: str, tail: str) -> ToolCall:
        match = _FENCED.match(tail)
        if not match:
            raise MalformedToolCall(
                f"tool call {index}: expected NAME, then ```json arguments ``` after {SEP}: {tail[:200]!r}",
                "DeepSeek V3 / R1 calls read function<｜tool▁sep｜>NAME\\n```json\\n{...}\\n```",
                call=index,
            )
        name = match.group("name").strip()
        return ToolCall(name, dumps(load_json(match.group("args"), index, "the arguments")))

    return _blocks(text, call)


def extract_v31(text: str, tools: Sequence[Mapping[str, Any]] = ()) -> tuple[str, list[ToolCall]]:
    def call(index: int, head: str, tail: str) -> ToolCall:
        return ToolCall(head.strip(), dumps(load_json(tail, index, "the arguments")))

    return _blocks(text, call)


def _blocks(text: str, call: Callable[[int, str, str], ToolCall]) -> tuple[str, list[ToolCall]]:
    """Content before the calls, and each block's call read by `call(index, before the separator, after it)`."""
    content, blocks = call_blocks(text, CALLS_BEGIN, CALL_BEGIN, CALL_END, CALLS_END)
    calls: list[ToolCall] = []
    for block, closed in blocks:
        head, sep, tail = block.partition(SEP)
        if not sep:
            raise MalformedToolCall(
                f"tool call {len(calls)} has no {SEP}: {block[:200]!r}",
                f"DeepSeek calls separate the name and the arguments with {SEP}",
                call=len(calls),
            )
        if not closed:
            raise unterminated(len(calls), head.strip() or None, CALL_END)
        calls.append(call(len(calls), head, tail))
    return content, calls
