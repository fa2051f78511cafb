"""A chat template's tool-call format and reasoning markers, recognised from the template text.

A rule matches when all of `needs` are in the template and none of `unless`; the specific rules come first (GLM's
tags and Qwen3-Coder's XML also use `<tool_call>`). A format onboard has no parser for (pythonic calls, Qwen3-Coder's
XML, DeepSeek V3.2's DSML, …) gets None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Evidence:
    name: str
    """A key of formats.FORMATS, or of reasoning.MARKERS."""
    evidence: str
    """The template line holding the first needed string (trimmed)."""


@dataclass(frozen=True)
class _Rule:
    name: str
    needs: tuple[str, ...]
    unless: tuple[str, ...] = ()


FORMAT_RULES = (
    _Rule("harmony", ("to=functions.", "<|channel|>")),
    _Rule("harmony", ("<|start|>assistant to=", "<|channel|>")),
    _Rule("kimi_k2", ("<|tool_call_argument_begin|>", "<|tool_calls_section_begin|>")),
    _Rule("deepseek_v3", ("<｜tool▁sep｜>", "```json")),
    _Rule("deepseek_v31", ("<｜tool▁sep｜>",)),
    _Rule("glm", ("<arg_key>", "<arg_value>", "<tool_call>")),
    _Rule("mistral", ("[TOOL_CALLS]",)),
    _Rule("hermes", ("<tool_call>", '"arguments"'), unless=("<function=", "<tool_calls>[")),
    _Rule("llama3_json", ('"parameters": ', "<|start_header_id|>")),
    _Rule("llama3_json", ('"parameters": ', "<|header_start|>")),
)
REASONING_RULES = (
    _Rule("mistral_think", ("[THINK]", "[/THINK]")),
    _Rule("think", ("<think>",), unless=("<|channel|>",)),
)


def recognise_format(template: str) -> Evidence | None:
    return _first(template, FORMAT_RULES)


def recognise_reasoning(template: str) -> Evidence | None:
    """Harmony's analysis channel is part of the harmony format, not a marker style."""
    return _first(template, REASONING_RULES)


def _first(template: str, rules: tuple[_Rule, ...]) -> Evidence | None:
    for rule in rules:
        if all(s in template for s in rule.needs) and not any(s in template for s in rule.unless):
            return Evidence(rule.name, _line_of(template, rule.needs[0]))
    return None


def _line_of(template: str, needle: str, limit: int = 160) -> str:
    at = template.index(needle)
    start = template.rfind("\n", 0, at) + 1
    end = template.find("\n", at)
    line = template[start : end if end != -1 else len(template)].strip()
    if len(line) <= limit:
        return line
    offset = max(0, min(line.find(needle) - limit // 2, len(line) - limit))
    return ("…" if offset else "") + line[offset : offset + limit] + ("…" if offset + limit < len(line) else "")


_TOOLS_VARIABLE = re.compile(r"\{[{%][^}]*\btools\b")


def declares_tools(template: str) -> bool:
    """Whether the template reads the `tools` variable apply_chat_template passes (inside a Jinja expression or
    statement): a template that never does cannot offer tools to the model."""
    return bool(_TOOLS_VARIABLE.search(template))
