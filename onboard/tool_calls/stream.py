"""OpenAI-style streaming deltas put back together into one turn, as a client does (an endpoint's stream, or vLLM's
parsers fed token by token): streaming agrees with the non-streaming answer when the reassembled turn equals it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from onboard.tool_calls.errors import MalformedToolCall
from onboard.tool_calls.turn import ParsedTurn, ToolCall, make_turn


def reassemble(deltas: Iterable[Mapping[str, Any]]) -> ParsedTurn:
    """One turn from a stream's `choices[0].delta` objects: content and reasoning concatenated, each tool call's name
    and arguments concatenated by its `index`."""
    content: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, list[str]] = {}
    for delta in deltas:
        content.append(delta.get("content") or "")
        reasoning.append(delta.get("reasoning_content") or delta.get("reasoning") or "")
        for part in delta.get("tool_calls") or ():
            if not isinstance(part.get("index"), int):
                raise MalformedToolCall(
                    f"a streamed tool-call delta has no index: {dict(part)}",
                    "each tool_calls delta carries the index of the call it continues",
                )
            function = part.get("function") or {}
            name, arguments = calls.setdefault(part["index"], ["", ""])
            calls[part["index"]] = [name + (function.get("name") or ""), arguments + (function.get("arguments") or "")]
    ordered = [ToolCall(*calls[i]) for i in sorted(calls)]
    return make_turn("".join(content), "".join(reasoning), ordered)
