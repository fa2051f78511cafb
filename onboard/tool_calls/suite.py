"""The tool-call conformance suite: fixed conversations offering `tools=` (a single call, parallel calls, nested and
unicode arguments, a turn that must not call a tool, the answer after a tool result), rendered through the model's
own chat template so every model is asked the same things in its own tool format. Each says what a model that
follows it answers (`expected`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onboard.errors import InputError
from onboard.tool_calls.turn import ParsedTurn, ToolCall

TOOLS: tuple[dict[str, Any], ...] = (
    {"type": "function", "function": {
        "name": "get_weather", "description": "Get the current weather in a city.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "create_event", "description": "Add an event to the calendar.",
        "parameters": {"type": "object", "properties": {
            "title": {"type": "string"},
            "when": {"type": "object", "properties": {"date": {"type": "string"}, "time": {"type": "string"}},
                     "required": ["date"]},
            "attendees": {"type": "array", "items": {"type": "string"}}},
            "required": ["title", "when"]}}},
)  # fmt: skip
"""The tools every conversation offers: one flat, one with a nested object and an array."""


@dataclass(frozen=True)
class Conversation:
    name: str
    checks: str
    """What the conversation checks, in a few words (report text)."""
    messages: tuple[dict[str, Any], ...]
    """OpenAI-style messages up to the turn the model answers; call arguments as JSON objects (what templates take)."""
    expected: ParsedTurn
    tools: tuple[dict[str, Any], ...] = TOOLS


def call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(name, json.dumps(arguments, ensure_ascii=False))


def assistant_message(turn: ParsedTurn, reasoning: str | None = None) -> dict[str, Any]:
    """`turn` as an assistant message a chat template renders: arguments as JSON objects, OpenAI-style call ids."""
    message: dict[str, Any] = {"role": "assistant", "content": turn.content or ""}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    if turn.tool_calls:
        message["tool_calls"] = [
            {
                "id": f"call{i:05d}",
                "type": "function",
                "function": {"name": c.name, "arguments": json.loads(c.arguments)},
            }
            for i, c in enumerate(turn.tool_calls)
        ]
    return message


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


_PARIS = call("get_weather", city="Paris")
_PARIS_RESULT = {"city": "Paris", "temperature": 18, "condition": "sunny"}

CONVERSATIONS: tuple[Conversation, ...] = (
    Conversation("single_call", "one call with a flat argument",
                 (_user("What is the weather in Paris?"),), ParsedTurn(tool_calls=(_PARIS,))),
    Conversation("parallel_calls", "two calls in one turn",
                 (_user("Compare the weather in Paris and Tokyo."),),
                 ParsedTurn(tool_calls=(_PARIS, call("get_weather", city="Tokyo")))),
    Conversation("nested_arguments", "a nested object and an array in the arguments",
                 (_user("Add a meeting called Team sync on 2025-03-14 at 10:00 with Ana and Bo."),),
                 ParsedTurn(tool_calls=(call("create_event", title="Team sync",
                                             when={"date": "2025-03-14", "time": "10:00"},
                                             attendees=["Ana", "Bo"]),))),
    Conversation("unicode_arguments", "non-ASCII text in the arguments",
                 (_user("Add an event called Grüße aus Köln 🎉 on 2025-05-01."),),
                 ParsedTurn(tool_calls=(call("create_event", title="Grüße aus Köln 🎉", when={"date": "2025-05-01"}),))),
    Conversation("no_call", "a turn that must not call a tool",
                 (_user("Say hello."),), ParsedTurn(content="Hello! How can I help you today?")),
    Conversation("after_tool_result", "the answer after a tool result, without a new call",
                 (_user("What is the weather in Paris?"), assistant_message(ParsedTurn(tool_calls=(_PARIS,))),
                  {"role": "tool", "tool_call_id": "call00000", "name": "get_weather",
                   "content": json.dumps(_PARIS_RESULT)}),
                 ParsedTurn(content="It is 18 degrees and sunny in Paris.")),
)  # fmt: skip


@dataclass(frozen=True)
class Rendered:
    name: str
    prompt: str
    """The rendering with add_generation_prompt=True: what the model continues."""
    prompt_ids: tuple[int, ...]
    reasoning_open: bool


def load_tokenizer(model: Path) -> Any:
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(model, trust_remote_code=False)
    except (OSError, ValueError) as exc:
        raise InputError(
            f"cannot load the tokenizer of {model}: {exc}",
            "the tool-call suite renders through the model's own tokenizer and chat template",
        ) from exc
    if not getattr(tokenizer, "chat_template", None):
        raise InputError(f"{model} has no chat template", "the tool-call suite needs the model's chat template")
    return tokenizer


def render(
    tokenizer: Any, conversation: Conversation, *, reasoning: str | None = None, **template_kwargs: Any
) -> Rendered:
    from onboard.tool_calls.reasoning import reasoning_open

    prompt = _apply(tokenizer, conversation.messages, conversation.tools, True, template_kwargs, conversation.name)
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    return Rendered(conversation.name, prompt, tuple(ids), reasoning_open(prompt, reasoning))


def answer_text(
    tokenizer: Any,
    conversation: Conversation,
    answer: ParsedTurn,
    *,
    reasoning: str | None = None,
    **template_kwargs: Any,
) -> str:
    """What the template writes for `answer` as the next assistant turn, end-of-turn marker included: the rendering
    with the answer appended, less the generation prompt."""
    prompt = _apply(tokenizer, conversation.messages, conversation.tools, True, template_kwargs, conversation.name)
    messages = (*conversation.messages, assistant_message(answer, reasoning))
    full = _apply(tokenizer, messages, conversation.tools, False, template_kwargs, conversation.name)
    if not full.startswith(prompt):
        raise InputError(
            f"the chat template renders conversation {conversation.name!r} with a different prefix once "
            "the answer is appended",
            "its generation prompt and its history rendering disagree",
        )
    return full[len(prompt) :].rstrip("\n")


def _apply(
    tokenizer: Any,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]],
    generation_prompt: bool,
    template_kwargs: Mapping[str, Any],
    name: str,
) -> str:
    """Calls' arguments go in as JSON objects (transformers' convention); a template that refuses them (DeepSeek R1's
    concatenates text) gets them as JSON text, as OpenAI's API sends them."""
    first: Exception | None = None
    for shaped in (list(messages), [_arguments_as_text(m) for m in messages]):
        try:
            return tokenizer.apply_chat_template(
                shaped, tools=list(tools), add_generation_prompt=generation_prompt, tokenize=False, **template_kwargs
            )
        except Exception as exc:  # a template raises anything (raise_exception, TypeError on an odd message)
            first = first or exc
    raise InputError(
        f"the chat template cannot render conversation {name!r} with tools: {type(first).__name__}: {first}",
        "the template may not support tools",
    ) from first


def api_messages(conversation: Conversation) -> list[dict[str, Any]]:
    """The conversation's messages as OpenAI's chat API takes them: call arguments as JSON text."""
    return [_arguments_as_text(m) for m in conversation.messages]


def _arguments_as_text(message: Mapping[str, Any]) -> dict[str, Any]:
    calls = [
        {**c, "function": {**c["function"], "arguments": json.dumps(c["function"]["arguments"], ensure_ascii=False)}}
        for c in message.get("tool_calls") or ()
    ]
    return {**message, "tool_calls": calls} if calls else dict(message)
