"""One assistant turn as OpenAI's API returns it: content, reasoning and tool calls (arguments as JSON text).

Content and reasoning are kept without surrounding whitespace (None when empty): engines differ in the newlines they
keep around the markers they remove, and no client reads meaning into them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: str

    def to_openai(self) -> dict[str, Any]:
        return {"type": "function", "function": {"name": self.name, "arguments": self.arguments}}

    @classmethod
    def from_openai(cls, data: Mapping[str, Any]) -> ToolCall:
        """From `{"type": "function", "function": {...}}` or `{"name", "arguments"}`; a JSON value as text."""
        function = data.get("function", data)
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        return cls(str(function.get("name", "")), arguments)


@dataclass(frozen=True)
class ParsedTurn:
    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()

    @property
    def called(self) -> bool:
        return bool(self.tool_calls)

    def to_openai(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.reasoning_content is not None:
            message["reasoning_content"] = self.reasoning_content
        if self.tool_calls:
            message["tool_calls"] = [call.to_openai() for call in self.tool_calls]
        return message

    @classmethod
    def from_openai(cls, message: Mapping[str, Any]) -> ParsedTurn:
        """From an assistant message; vLLM names the reasoning `reasoning` (newer) or `reasoning_content`."""
        reasoning = message.get("reasoning_content", message.get("reasoning"))
        calls = message.get("tool_calls") or ()
        return make_turn(message.get("content"), reasoning, [ToolCall.from_openai(c) for c in calls])


def make_turn(content: str | None, reasoning: str | None, calls: Iterable[ToolCall] = ()) -> ParsedTurn:
    return ParsedTurn(_text(content), _text(reasoning), tuple(calls))


def _text(text: str | None) -> str | None:
    return (text or "").strip() or None


def _json(text: str) -> tuple[bool, Any]:
    try:
        return True, json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return False, None


def diff_turns(expected: ParsedTurn, actual: ParsedTurn, *, reasoning: bool = True) -> list[str]:
    """What differs between two turns, one line each (arguments compared as JSON); empty when they agree."""
    out: list[str] = []
    if expected.called != actual.called:
        out.append(
            f"expected {'a tool call' if expected.called else 'no tool call'}, "
            f"got {'a tool call' if actual.called else 'none'}"
        )
    elif len(expected.tool_calls) != len(actual.tool_calls):
        out.append(f"expected {len(expected.tool_calls)} tool calls, got {len(actual.tool_calls)}")
    for i, (want, got) in enumerate(zip(expected.tool_calls, actual.tool_calls)):
        if want.name != got.name:
            out.append(f"call {i}: function {got.name!r}, expected {want.name!r}")
        ok_want, want_args = _json(want.arguments)
        ok_got, got_args = _json(got.arguments)
        if not ok_got:
            out.append(f"call {i}: arguments are not JSON: {got.arguments[:200]!r}")
        elif not ok_want or want_args != got_args:
            out.append(f"call {i}: arguments {got.arguments[:200]}, expected {want.arguments[:200]}")
    if expected.content != actual.content:
        out.append(f"content {_show(actual.content)}, expected {_show(expected.content)}")
    if reasoning and expected.reasoning_content != actual.reasoning_content:
        out.append(f"reasoning {_show(actual.reasoning_content)}, expected {_show(expected.reasoning_content)}")
    return out


def _show(text: str | None, limit: int = 120) -> str:
    if text is None:
        return "none"
    return repr(text if len(text) <= limit else text[:limit] + "…")
