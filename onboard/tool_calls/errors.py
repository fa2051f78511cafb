"""The tool-call errors: each names the call (index and function) and what is wrong with it."""

from __future__ import annotations

from onboard.errors import InputError


class ToolCallError(InputError):
    """A tool call that cannot be used: its `call` index (0-based, None when not known) and function `name`."""

    def __init__(self, message: str, hint: str | None = None, *, call: int | None = None, name: str | None = None):
        super().__init__(message, hint)
        self.call = call
        self.name = name


class MalformedToolCall(ToolCallError):
    """Arguments that are not a JSON object, a missing name, an unterminated call block."""


class EmptyArguments(ToolCallError):
    """An empty `arguments` string: OpenAI's API sends `"{}"` for a call without arguments."""


class UnknownTool(ToolCallError):
    """A call to a function the request did not offer in `tools`."""


class UnknownFormat(InputError):
    """A tool-call format name onboard has no parser for."""


class ParsersUnavailable(InputError):
    """vLLM's parsers cannot be run here (its virtualenv is missing, or its worker failed)."""
