"""Mistral `[TOOL_CALLS]`, both generations:

- v3 tokenizers (Mistral 7B v0.3, Nemo, Small 3.1): `[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]`;
- v11+ tokenizers (Small 3.2, Devstral, Ministral 3, Magistral): `[TOOL_CALLS]name[ARGS]{...}`, one marker per call
  (v11's templates write `name[CALL_ID]id[ARGS]{...}` in the history: the id is skipped).

Which one is read from the text after each marker (a JSON list or object, or a name), as vLLM decides it from
whether the tokenizer has `[ARGS]`. Content is the text before the first marker.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from onboard.tool_calls.errors import MalformedToolCall
from onboard.tool_calls.formats.common import call_blocks, call_from_object, dumps, raw_json
from onboard.tool_calls.turn import ToolCall

TOOL_CALLS, ARGS, CALL_ID = "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"


def extract(text: str, tools: Sequence[Mapping[str, Any]] = ()) -> tuple[str, list[ToolCall]]:
    content, blocks = call_blocks(text, TOOL_CALLS, TOOL_CALLS, None)
    calls: list[ToolCall] = []
    for chunk, _ in blocks:
        head = chunk.lstrip()
        if head.startswith(("[", "{")):
            value = raw_json(head, 0, len(calls), "the call list")[0]
            for obj in value if isinstance(value, list) else [value]:
                calls.append(call_from_object(obj, len(calls), ("arguments",)))
            continue
        name, sep, arguments = chunk.partition(ARGS)
        if not sep:
            raise MalformedToolCall(
                f"tool call {len(calls)}: {TOOL_CALLS} is followed by neither a JSON list nor "
                f"a name and {ARGS}: {chunk[:200]!r}",
                "v11+ Mistral calls read [TOOL_CALLS]name[ARGS]{...}",
                call=len(calls),
            )
        value = raw_json(arguments, 0, len(calls), "the arguments")[0]
        calls.append(ToolCall(name.partition(CALL_ID)[0].strip(), dumps(value)))
    return content, calls
