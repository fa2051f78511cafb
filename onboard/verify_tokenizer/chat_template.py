"""A Jinja environment with transformers' `apply_chat_template` semantics, a frozen clock and size guards.

Mirrors transformers/utils/chat_template_utils.py: ImmutableSandboxedEnvironment(trim_blocks, lstrip_blocks,
loopcontrols + `{% generation %}`), `raise_exception`, their `tojson` signature, `strftime_now`, the restricted
`dict` and `namespace`. Differences, all deliberate: `strftime_now` reads a frozen clock and records that it was
called (a template whose output changes every day cannot have goldens), and `*` on strings/lists is capped so a
template cannot allocate gigabytes before the output cap sees anything, and touching an unsafe attribute
(`__class__`) raises instead of rendering as an empty string.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.utils
from jinja2.sandbox import ImmutableSandboxedEnvironment

FROZEN_NOW = datetime(2025, 1, 15, 12, 0, 0)
"""What `strftime_now` sees: fixed so renders are reproducible (goldens), distinct from Llama's "26 Jul 2024"."""
MAX_REPEAT_CHARS = 1_000_000


class ClockRead:
    """Records whether the template called strftime_now during a render."""

    def __init__(self) -> None:
        self.read = False


class GenerationBlock(jinja2.ext.Extension):
    """`{% generation %}…{% endgeneration %}` renders its body (transformers tracks assistant spans with it)."""

    tags = {"generation"}

    def parse(self, parser: jinja2.parser.Parser) -> jinja2.nodes.CallBlock:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller: Any) -> str:
        return caller()


class _TemplateDict:
    """transformers' restricted `dict` global: callable and fromkeys, nothing else to reach through."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict:
        return dict(*args, **kwargs)

    def fromkeys(self, *args: Any, **kwargs: Any) -> dict:
        return dict.fromkeys(*args, **kwargs)


class _TemplateNamespace(jinja2.utils.Namespace):
    """transformers' namespace: no underscore-prefixed attributes."""

    def __init__(*args: Any, **kwargs: Any) -> None:  # noqa: N805 - same signature trick as jinja2's Namespace
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            _TemplateNamespace._check(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name: str, value: Any) -> None:
        _TemplateNamespace._check(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check(name: Any) -> None:
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(f"namespace attribute {name!r} starts with an underscore")


class _GuardedEnvironment(ImmutableSandboxedEnvironment):
    intercepted_binops = frozenset({"*"})

    def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
        # jinja2 returns an Undefined that prints as "" (so `{{ x.__class__ }}` renders nothing under transformers);
        # a template probing internals is hostile, and we say so instead of rendering around it.
        raise jinja2.exceptions.SecurityError(f"access to attribute {attribute!r} of {type(obj).__name__!r} is unsafe")

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            for seq, count in ((left, right), (right, left)):
                if (
                    isinstance(seq, (str, list, tuple))
                    and isinstance(count, int)
                    and len(seq) * count > MAX_REPEAT_CHARS
                ):
                    raise jinja2.exceptions.SecurityError(f"repetition would build {len(seq) * count} items")
        return super().call_binop(context, operator, left, right)


def build_environment(clock: ClockRead, now: datetime = FROZEN_NOW) -> ImmutableSandboxedEnvironment:
    env = _GuardedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationBlock, jinja2.ext.loopcontrols]
    )

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(
        x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None, sort_keys: bool = False
    ) -> str:
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt: str) -> str:
        clock.read = True
        return now.strftime(fmt)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    env.globals["dict"] = _TemplateDict()
    env.globals["namespace"] = _TemplateNamespace
    return env


# Polyfills llama.cpp applies when its capability probe finds a template unable to take a role. Explicit opt-in.
def system_merge(context: dict[str, Any]) -> dict[str, Any]:
    """llama.cpp: fold a leading system message into the first user message as `system + "\\n" + user`."""
    messages = list(context.get("messages") or [])
    if len(messages) >= 2 and messages[0].get("role") == "system":
        user_at = next((i for i, m in enumerate(messages) if m.get("role") == "user"), None)
        if user_at is not None:
            merged = dict(messages[user_at])
            merged["content"] = f"{messages[0].get('content', '')}\n{merged.get('content', '')}"
            messages = messages[1:user_at] + [merged] + messages[user_at + 1 :]
    return {**context, "messages": messages}


POLYFILLS = {"system-merge": system_merge}
