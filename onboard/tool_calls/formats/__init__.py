"""The native tool-call formats onboard reads, one module each, and `parse_turn`: reasoning split, calls extracted,
each call checked against the offered tools.

A format's row names the vLLM parsers that read it (`--tool-call-parser`, and the `--reasoning-parser` for its
reasoning markers): what validate expects an endpoint serving the model to be configured with.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from onboard.tool_calls.arguments import decode_arguments, find_tool
from onboard.tool_calls.errors import UnknownFormat
from onboard.tool_calls.reasoning import split_reasoning
from onboard.tool_calls.turn import ParsedTurn, make_turn


@dataclass(frozen=True)
class Format:
    name: str
    extract: str
    """`module:function` taking (text, tools) and returning (content, calls); harmony's parses the whole turn."""
    vllm_tool_parser: str
    vllm_reasoning_parser: str | None
    """The reasoning parser for this format's reasoning markers (used when the template has them)."""
    description: str


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format("hermes", "hermes:extract", "hermes", "qwen3", "<tool_call>{json}</tool_call> (Hermes, Qwen)"),
        Format("llama3_json", "llama3_json:extract", "llama3_json", None,
               '{"name": ..., "parameters": ...} after an optional <|python_tag|> (Llama 3.x, 4)'),
        Format("mistral", "mistral:extract", "mistral", "mistral", "[TOOL_CALLS] JSON list or name[ARGS]{json}"),
        Format("harmony", "harmony:parse", "openai", "openai_gptoss", "gpt-oss harmony channels"),
        Format("deepseek_v3", "deepseek:extract_v3", "deepseek_v3", "deepseek_r1",
               "<｜tool▁call▁begin｜>function<｜tool▁sep｜>name ```json``` (DeepSeek V3, R1)"),
        Format("deepseek_v31", "deepseek:extract_v31", "deepseek_v31", "deepseek_v3",
               "<｜tool▁call▁begin｜>name<｜tool▁sep｜>{json} (DeepSeek V3.1)"),
        Format("kimi_k2", "kimi_k2:extract", "kimi_k2", "kimi_k2", "<|tool_call_begin|>functions.name:N (Kimi K2)"),
        Format("glm", "glm:extract", "glm45", "glm45", "<tool_call>name<arg_key>k</arg_key><arg_value>v… (GLM 4.5+)"),
    )
}  # fmt: skip


def get_format(name: str) -> Format:
    if name not in FORMATS:
        raise UnknownFormat(f"unknown tool-call format {name!r}", f"known formats: {', '.join(FORMATS)}")
    return FORMATS[name]


def _function(fmt: Format) -> Any:
    module, _, function = fmt.extract.partition(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), function)


def parse_turn(
    format_name: str,
    text: str,
    tools: Sequence[Mapping[str, Any]] | None = None,
    *,
    reasoning: str | None = None,
    reasoning_open: bool = False,
) -> ParsedTurn:
    """A model's raw generation read as the endpoint should return it.

    Args:
        format_name: a key of FORMATS (onboard.tool_calls.detect recognises it from the chat template).
        text: the generated text, special tokens kept, the end-of-turn token left out.
        tools: the offered tools; when given, each call must name one of them (UnknownTool).
        reasoning: the reasoning markers (`think`, `mistral_think`) or None; harmony splits its own.
        reasoning_open: the generation prompt opened the reasoning (reasoning.reasoning_open).

    Raises:
        MalformedToolCall, EmptyArguments, UnknownTool (all ToolCallError): a call that cannot be used.
    """
    fmt = get_format(format_name)
    if fmt.name == "harmony":
        turn = _function(fmt)(text)
    else:
        thought, rest = split_reasoning(text, reasoning, open_at_start=reasoning_open)
        content, calls = _function(fmt)(rest, tools or ())
        turn = make_turn(content, thought, calls)
    for index, call in enumerate(turn.tool_calls):
        if tools is not None:
            find_tool(tools, call.name, index)
        decode_arguments(call, index)
    return turn
