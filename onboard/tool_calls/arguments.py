"""A call's arguments checked against the request: JSON object text, a function that was offered, and valid against
that function's `parameters` JSON schema (the draft the schema names, else 2020-12 as OpenAI's function calling)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from onboard.errors import InputError
from onboard.tool_calls.errors import EmptyArguments, MalformedToolCall, UnknownTool
from onboard.tool_calls.turn import ToolCall


def spec_of(tools: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any] | None:
    """The function spec named `name` among OpenAI tools (`{"type": "function", "function": {...}}`) or bare specs."""
    for tool in tools:
        spec = tool.get("function", tool)
        if spec.get("name") == name:
            return spec
    return None


def find_tool(tools: Sequence[Mapping[str, Any]], name: str, index: int | None = None) -> Mapping[str, Any]:
    """The function spec named `name`; UnknownTool when the request did not offer it."""
    spec = spec_of(tools, name)
    if spec is not None:
        return spec
    offered = ", ".join(str(t.get("function", t).get("name")) for t in tools) or "none"
    raise UnknownTool(
        f"{_which(index)} calls {name!r}, which is not among the offered tools ({offered})",
        "a model calling a function it was not given: check the template renders the tools, or that "
        "the parser reads the name from the right place",
        call=index,
        name=name,
    )


def decode_arguments(call: ToolCall, index: int | None = None) -> dict[str, Any]:
    """The call's arguments as a JSON object; EmptyArguments or MalformedToolCall when they are not one."""
    if not call.arguments.strip():
        raise EmptyArguments(
            f"{_which(index)} ({call.name!r}) has an empty arguments string",
            'a call without arguments sends "{}" (OpenAI\'s API); an empty string breaks clients that json.loads it',
            call=index,
            name=call.name,
        )
    try:
        value = json.loads(call.arguments)
    except json.JSONDecodeError as exc:
        raise MalformedToolCall(
            f"{_which(index)} ({call.name!r}) has arguments that are not JSON ({exc.msg} at "
            f"character {exc.pos}): {call.arguments[:200]!r}",
            "the model wrote invalid JSON, or the parser cut the call at the wrong place",
            call=index,
            name=call.name,
        ) from exc
    if not isinstance(value, dict):
        raise MalformedToolCall(
            f"{_which(index)} ({call.name!r}) has arguments that are a JSON "
            f"{type(value).__name__}, not an object: {call.arguments[:200]!r}",
            "function arguments are a JSON object of parameter names",
            call=index,
            name=call.name,
        )
    return value


def schema_errors(arguments: Any, parameters: Mapping[str, Any] | None) -> list[str]:
    """Where `arguments` break the JSON schema `parameters`, one line each (`$.when.date: 5 is not of type
    'string'`); empty when valid or when the tool declares no schema. InputError for a schema that is invalid."""
    if not parameters:
        return []
    import jsonschema

    cls = jsonschema.validators.validator_for(parameters, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(parameters)
    except jsonschema.SchemaError as exc:
        raise InputError(
            f"the tool's parameters are not a valid JSON schema: {exc.message}",
            "fix the tool definition in the request (OpenAI's function parameters are a JSON schema)",
        ) from exc
    return sorted(f"{_path(e.absolute_path)}: {e.message}" for e in cls(parameters).iter_errors(arguments))


def check_call(call: ToolCall, tools: Sequence[Mapping[str, Any]], index: int | None = None) -> list[str]:
    """Raises when the call cannot be used (unknown function, empty or non-JSON arguments); returns where its
    arguments break the function's schema."""
    spec = find_tool(tools, call.name, index)
    return schema_errors(decode_arguments(call, index), spec.get("parameters"))


def _path(parts: Any) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


def _which(index: int | None) -> str:
    return "a tool call" if index is None else f"tool call {index}"
