"""Render one template for `onboard render-template`, turning sandbox results into messages and exit codes."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from onboard.errors import ChecksFailed, InputError
from onboard.verify_tokenizer.sandbox import FROZEN_NOW, RenderResult, render

POLYFILL_HINT = "pass --polyfill system-merge to fold it into the first user turn (what llama.cpp does)"


class TemplateRejected(ChecksFailed):
    """The template ran and refused the input (raise_exception, or a Python error inside the template): exit 1."""


class TemplateUnusable(InputError):
    """Syntax error, sandbox violation, endless loop or runaway output: exit 2."""


def system_merge(context: dict[str, Any]) -> dict[str, Any]:
    """llama.cpp's polyfill for a template that rejects the system role: fold a leading system message into the
    first user message as `system + "\\n" + user`."""
    messages = list(context.get("messages") or [])
    if len(messages) >= 2 and messages[0].get("role") == "system":
        user_at = next((i for i, m in enumerate(messages) if m.get("role") == "user"), None)
        if user_at is not None:
            merged = dict(messages[user_at])
            merged["content"] = f"{messages[0].get('content', '')}\n{merged.get('content', '')}"
            messages = messages[1:user_at] + [merged] + messages[user_at + 1 :]
    return {**context, "messages": messages}


POLYFILLS = {"system-merge": system_merge}


def system_text(context: dict[str, Any]) -> str | None:
    messages = context.get("messages")
    if (
        isinstance(messages, list)
        and messages
        and isinstance(messages[0], dict)
        and messages[0].get("role") == "system"
    ):
        content = messages[0].get("content")
        return content if isinstance(content, str) and content.strip() else None
    return None


def system_dropped(context: dict[str, Any], rendered: str | None) -> bool:
    """A render (None when it failed) without the system message's text: the template ignores the role."""
    text = system_text(context)
    return bool(rendered is not None and text and text not in rendered)


def _system_at_fault(
    template: str, context: dict[str, Any], result: RenderResult, timeout_s: float, now: datetime | None
) -> bool:
    """Whether the system message is what the template raised on: without it the conversation renders, or fails
    further on with another error. The same error without it means something else (tool-call arguments, say)."""
    if result.error_kind != "template-error" or not system_text(context):
        return False
    again = render(template, {**context, "messages": context["messages"][1:]}, timeout_s=timeout_s, now=now)
    return again.ok or again.message != result.message


ARGUMENTS_AS_TEXT_HINT = (
    "the template joins tool-call arguments as text and fails on an object, the form transformers documents and vLLM "
    "passes (it parses the OpenAI JSON string into one): pass `arguments` as a JSON string, or make the template "
    "serialize an object (`| tojson`)"
)


def joins_arguments_as_text(message: str | None, context: dict[str, Any]) -> bool:
    """A render that failed on tool-call arguments given as an object (the template concatenates them as text)."""
    calls = [c for m in context.get("messages") or [] if isinstance(m, dict) for c in m.get("tool_calls") or []]
    structured = any(isinstance((c.get("function") or {}).get("arguments"), dict) for c in calls if isinstance(c, dict))
    return structured and "dict" in (message or "")


def _rejection_hint(result: RenderResult, context: dict[str, Any]) -> str:
    if joins_arguments_as_text(result.message, context):
        return ARGUMENTS_AS_TEXT_HINT
    return "check the messages against what the template accepts"


def render_for_cli(
    template: str, context: dict[str, Any], polyfill: str | None, timeout_s: float, now: datetime | None = None
) -> tuple[str, list[str]]:
    """The rendered text and notes for stderr; raises TemplateRejected / TemplateUnusable."""
    notes: list[str] = []
    plain_context = context
    if polyfill:
        context = POLYFILLS[polyfill](context)
        notes.append(f"note: polyfill {polyfill} applied")
    result = render(template, context, timeout_s=timeout_s, now=now)
    if result.read_clock:
        notes.append(
            f"note: the template read the clock (strftime_now); rendered with the frozen time {now or FROZEN_NOW:%Y-%m-%d %H:%M}"
        )
    if not result.ok:
        raise_for(
            result, context, polyfill is None and _system_at_fault(template, plain_context, result, timeout_s, now)
        )
    if polyfill is None and system_dropped(plain_context, result.text):
        notes.append(f"warning: system role rejected: the template dropped the system message; {POLYFILL_HINT}")
    return result.text or "", notes


def raise_for(result: RenderResult, context: dict[str, Any], system_at_fault: bool) -> None:
    if result.error_kind == "template-error":
        if system_at_fault:
            raise TemplateRejected(f"system role rejected: the template raised: {result.message}", POLYFILL_HINT)
        raise TemplateRejected(f"the template raised: {result.message}", _rejection_hint(result, context))
    hints = {
        "syntax": "fix the template; it is not valid Jinja",
        "security": "the template touches Python internals; transformers' sandbox refuses it too",
        "timeout": "the template loops without end (or nearly); raise --timeout only if it is legitimately slow",
        "output-limit": "the template produces runaway output; check its loops",
        "crash": "the template recursed too deeply or crashed the renderer",
    }
    raise TemplateUnusable(f"template {result.error_kind}: {result.message}", hints.get(result.error_kind or ""))
