"""Hermes / Qwen: `<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`, one block per call.

Qwen2.5, Qwen3 (non-coder), QwQ, Hermes 2 Pro / 3, SmolLM3, Granite 4. Content is the text before the first block
(vLLM's hermes parser keeps the same; text after the calls is dropped by both). An unclosed last block is read to
the end of the text, as vLLM does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from onboard.tool_calls.formats.common import call_blocks, call_from_object, load_json
from onboard.tool_calls.turn import ToolCall

START, END = "<tool_call>", "</tool_call>"


def extract(text: str, tools: Sequence[Mapping[str, Any]] = ()) -> tuple[str, list[ToolCall]]:
    content, blocks = call_blocks(text, START, START, END)
    calls = [load_json(block, i, "the call") for i, (block, _) in enumerate(blocks)]
    return content, [call_from_object(obj, i, ("arguments",)) for i, obj in enumerate(calls)]
