"""The tool-call errors: a model's or an engine's tool call that cannot be used as a call.

Each names the call (index and function) and what is wrong with it; validate turns them into findings.
"""

from __future__ import annotations

from onboard.errors import InputError


class ToolCallError(InputError):
    """A tool call that cannot be used: its `call` index (0-based, None when not known) and function `name`."""

    def __init__(self, message: str, hint: str | None = None, *, call: int | None = None, name: str | None = None):
        super().__init__(message, hint)
        self.call = call
        self.name = name


class MalformedToolCall(ToolCallError):
    """A call whose text cannot be read: arguments that are not JSON (or not a JSON object), a missing name, an
    unterminated call block."""


class EmptyArguments(ToolCallError):
    """A call whose `arguments` string is empty: OpenAI's API sends `"{}"` for a call without arguments."""


class UnknownTool(ToolCallError):
    """A call to a function the request did not offer in `tools`."""


class UnknownFormat(InputError):
    """A tool-call format (or vLLM parser) name onboard has no parser for."""


class ParsersUnavailable(InputError):
    """vLLM's parsers cannot be run here (its virtualenv is missing, or its worker failed)."""
