"""Llama 3.1 / 3.2 / 3.3 / 4 JSON calls: `{"name": ..., "parameters": {...}}`, optionally after `<|python_tag|>`,
several separated by `;`. The whole answer is the call: text that does not start with one is content.

Llama's built-in tools (`<|python_tag|>brave_search.call(query=...)`) are Python, not JSON: not read here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from onboard.tool_calls.errors import MalformedToolCall
from onboard.tool_calls.formats.common import call_from_object, raw_json
from onboard.tool_calls.turn import ToolCall

PYTHON_TAG = "<|python_tag|>"
ARGUMENT_KEYS = ("parameters", "arguments")


def extract(text: str, tools: Sequence[Mapping[str, Any]] = ()) -> tuple[str, list[ToolCall]]:
    body = text.strip()
    tagged = body.startswith(PYTHON_TAG)
    body = body.removeprefix(PYTHON_TAG).lstrip()
    if not body.startswith("{") or (not tagged and not _looks_like_call(body)):
        return text, []
    calls: list[ToolCall] = []
    pos = 0
    while pos < len(body) and body[pos] == "{":
        obj, pos = raw_json(body, pos, len(calls), "the call")
        calls.append(call_from_object(obj, len(calls), ARGUMENT_KEYS))
        while pos < len(body) and (body[pos].isspace() or body[pos] == ";"):
            pos += 1
    return "", calls


def _looks_like_call(body: str) -> bool:
    """An untagged answer is a call when its JSON object has a "name": `{"a": 1}` asked for by the user is content."""
    try:
        obj, _ = raw_json(body, 0, 0, "the call")
    except MalformedToolCall:
        return '"name"' in body[:64]  # a call the model broke: let the parse name the JSON error
    return isinstance(obj, dict) and "name" in obj and any(k in obj for k in ARGUMENT_KEYS)
