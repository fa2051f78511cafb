"""Pieces the format parsers share: JSON read with named errors, and a call built from a JSON object."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from onboard.tool_calls.errors import MalformedToolCall
from onboard.tool_calls.turn import ToolCall

_DECODER = json.JSONDecoder()


def load_json(text: str, index: int, what: str) -> Any:
    """`text` as one JSON value (surrounding whitespace allowed); MalformedToolCall naming the call otherwise."""
    return raw_json(text.strip(), 0, index, what)[0]


def raw_json(text: str, pos: int, index: int, what: str) -> tuple[Any, int]:
    """The JSON value starting at `pos` (after whitespace) and where it ends; the text after it is the caller's."""
    while pos < len(text) and text[pos].isspace():
        pos += 1
    try:
        return _DECODER.raw_decode(text, pos)
    except json.JSONDecodeError as exc:
        raise MalformedToolCall(
            f"tool call {index}: {what} is not valid JSON ({exc.msg} at character {exc.pos}): "
            f"{text[pos : pos + 200]!r}",
            "the model wrote invalid JSON inside the call, or the call was cut short (max_tokens)",
            call=index,
        ) from exc


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def call_from_object(obj: Any, index: int, argument_keys: tuple[str, ...]) -> ToolCall:
    """A call from `{"name": ..., <argument key>: {...}}`; MalformedToolCall when the name or arguments are missing."""
    if not isinstance(obj, Mapping) or not isinstance(obj.get("name"), str):
        raise MalformedToolCall(
            f"tool call {index} has no function name: {dumps(obj)[:200]}",
            'a call is a JSON object with a "name" string',
            call=index,
        )
    key = next((k for k in argument_keys if k in obj), None)
    if key is None:
        keys = " or ".join(f'"{k}"' for k in argument_keys)
        raise MalformedToolCall(
            f"tool call {index} ({obj['name']!r}) has no {keys}: {dumps(obj)[:200]}",
            f"a call carries its arguments under {keys}",
            call=index,
            name=obj["name"],
        )
    return ToolCall(obj["name"], dumps(obj[key]))


def call_blocks(
    text: str, opens: str, call_begin: str, call_end: str | None, section_end: str | None = None
) -> tuple[str, list[tuple[str, bool]]]:
    """The content before `opens` (a section marker, or the first call's own marker), and each call's text between
    `call_begin` and `call_end` (or the next `call_begin`) with whether `call_end` closed it; the text after a
    call's end is not content (as in vLLM's parsers). No `opens` in the text: (text, [])."""
    first = text.find(opens)
    if first == -1:
        return text, []
    rest = text[first if opens == call_begin else first + len(opens) :]
    if section_end:
        rest = rest.split(section_end, 1)[0]
    blocks = []
    for chunk in rest.split(call_begin)[1:]:
        block, closed, _ = chunk.partition(call_end) if call_end else (chunk, "", "")
        blocks.append((block, bool(closed)))
    return text[:first], blocks


def unterminated(index: int, name: str | None, marker: str) -> MalformedToolCall:
    return MalformedToolCall(
        f"tool call {index} is not closed by {marker}",
        "the generation stopped inside the call (max_tokens, or a stop string that cuts it)",
        call=index,
        name=name,
    )
