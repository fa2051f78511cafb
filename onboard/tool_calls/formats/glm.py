"""GLM 4.5 / 4.6 / 4.7's tag calls: `<tool_call>NAME\\n<arg_key>k</arg_key>\\n<arg_value>v</arg_value>…</tool_call>`
(4.7 writes no newlines). Values are text: the template writes strings as they are and other values as JSON, so a
value is read as JSON where the tool's schema gives the parameter a type other than string (vLLM's glm45 parser
coerces to the schema's type the same way); without a schema it stays a string. Content is the text before the
first call."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from onboard.tool_calls.arguments import function_of
from onboard.tool_calls.errors import MalformedToolCall
from onboard.tool_calls.formats.common import call_blocks, dumps, unterminated
from onboard.tool_calls.turn import ToolCall

START, END = "<tool_call>", "</tool_call>"
_ARGUMENT = re.compile(r"<arg_key>(?P<key>.*?)</arg_key>\s*<arg_value>(?P<value>.*?)</arg_value>", re.DOTALL)
_IS_TYPE = {
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "null": lambda v: v is None,
}


def extract(text: str, tools: Sequence[Mapping[str, Any]] = ()) -> tuple[str, list[ToolCall]]:
    content, blocks = call_blocks(text, START, START, END)
    calls: list[ToolCall] = []
    for block, closed in blocks:
        name, _, rest = block.partition("<arg_key>")
        name = name.strip()
        if not name:
            raise MalformedToolCall(
                f"tool call {len(calls)} has no function name: {block[:200]!r}",
                "GLM calls read <tool_call>NAME<arg_key>…",
                call=len(calls),
            )
        if not closed:
            raise unterminated(len(calls), name, END)
        properties = _properties(tools, name)
        arguments = {
            m["key"].strip(): _value(m["value"], properties.get(m["key"].strip()))
            for m in _ARGUMENT.finditer("<arg_key>" + rest if rest else "")
        }
        calls.append(ToolCall(name, dumps(arguments)))
    return content, calls


def _properties(tools: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any]:
    for tool in tools:
        if function_of(tool).get("name") == name:
            return (function_of(tool).get("parameters") or {}).get("properties") or {}
    return {}


def _value(raw: str, schema: Any) -> Any:
    types = _types(schema)
    if not types or types <= {"string"}:
        return raw
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return raw
    return value if any(_IS_TYPE[t](value) for t in types if t in _IS_TYPE) else raw


def _types(schema: Any) -> set[str]:
    """The JSON types a parameter schema allows: `type` (a name or a list), `enum` values, any/one/allOf members."""
    if not isinstance(schema, Mapping):
        return set()
    declared = schema.get("type")
    types = {declared} if isinstance(declared, str) else set(declared or ())
    for value in schema.get("enum") or ():
        types.add("string" if isinstance(value, str) else "boolean" if isinstance(value, bool) else "number")
    for key in ("anyOf", "oneOf", "allOf"):
        for member in schema.get(key) or ():
            types |= _types(member)
    return types
