"""Render chat templates as transformers' `apply_chat_template` does (its Jinja environment, globals and filters),
in a forked child with bounded time and output: a Jinja loop cannot be interrupted in a thread.

Deliberate differences: `strftime_now` reads a frozen clock and records that it was called (a template whose output
changes every day cannot have goldens), `*` on strings and lists is capped, and touching an unsafe attribute
(`__class__`) raises instead of rendering as an empty string.
"""

from __future__ import annotations

import json
import multiprocessing
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.utils
from jinja2.sandbox import ImmutableSandboxedEnvironment

FROZEN_NOW = datetime(2025, 1, 15, 12, 0, 0)
"""What `strftime_now` sees: fixed so renders are reproducible, distinct from Llama's "26 Jul 2024"."""
MAX_REPEAT_CHARS = 1_000_000
DEFAULT_TIMEOUT_S = 10.0
DEFAULT_MAX_OUTPUT = 4_000_000
"""Characters. Real renders of the fixed conversations are a few KB; a 4 MB render is a runaway template."""


@dataclass(frozen=True)
class RenderResult:
    ok: bool
    text: str | None
    error_kind: str | None
    """template-error (raise_exception / TemplateError), syntax, security, timeout, output-limit, crash."""
    message: str | None
    read_clock: bool


class ClockRead:
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
        # jinja2 returns an Undefined that prints as "": a template probing internals is hostile, and we say so.
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


def _render_one(template: Any, clock: ClockRead, context: dict[str, Any], max_output: int) -> RenderResult:
    clock.read = False
    size = 0
    chunks: list[str] = []
    try:
        for chunk in template.generate(**context):
            size += len(chunk)
            if size > max_output:
                return RenderResult(False, None, "output-limit", f"render exceeded {max_output} characters", clock.read)
            chunks.append(chunk)
    except jinja2.exceptions.SecurityError as exc:
        return RenderResult(False, None, "security", f"sandbox blocked: {exc}", clock.read)
    except jinja2.exceptions.TemplateError as exc:
        return RenderResult(False, None, "template-error", str(exc), clock.read)
    except RecursionError:
        return RenderResult(False, None, "crash", "recursion too deep", clock.read)
    except MemoryError:
        return RenderResult(False, None, "output-limit", "out of memory while rendering", clock.read)
    except Exception as exc:  # templates raise arbitrary Python errors (TypeError on None + str, …)
        return RenderResult(False, None, "template-error", f"{type(exc).__name__}: {exc}", clock.read)
    return RenderResult(True, "".join(chunks), None, None, clock.read)


def _child(conn: Any, source: str, contexts: Sequence[dict[str, Any]], max_output: int, now: datetime | None) -> None:
    _limit_memory()
    clock = ClockRead()
    try:
        template = build_environment(clock, now or FROZEN_NOW).from_string(source)
    except jinja2.exceptions.TemplateSyntaxError as exc:
        conn.send(("syntax", f"line {exc.lineno}: {exc.message}"))
        conn.close()
        return
    for context in contexts:
        conn.send(("result", _render_one(template, clock, context, max_output)))
    conn.close()


def _limit_memory(extra: int = 2 * 2**30) -> None:
    """Cap the child's address space at its current size + `extra`: a memory bomb fails instead of swapping."""
    try:
        import resource

        with open("/proc/self/status") as fh:
            vm = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmSize:"))
        resource.setrlimit(resource.RLIMIT_AS, (vm + extra, vm + extra))
    except (ImportError, OSError, ValueError, StopIteration):
        pass


def render_many(
    source: str,
    contexts: Sequence[dict[str, Any]],
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_output: int = DEFAULT_MAX_OUTPUT,
    now: datetime | None = None,
) -> list[RenderResult]:
    """Render `source` once per context (`now`: what strftime_now sees). Never raises for template problems: each
    result says what happened."""
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    results: list[RenderResult] = []
    while len(results) < len(contexts):
        pending = list(contexts[len(results) :])
        parent, child_conn = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child, args=(child_conn, source, pending, max_output, now), daemon=True)
        proc.start()
        child_conn.close()
        try:
            for _ in pending:
                if not parent.poll(timeout_s):
                    results.append(
                        RenderResult(False, None, "timeout", f"render did not finish in {timeout_s:g} s", False)
                    )
                    break
                try:
                    kind, payload = parent.recv()
                except EOFError:
                    results.append(RenderResult(False, None, "crash", f"renderer died (exit {proc.exitcode})", False))
                    break
                if kind == "syntax":
                    syntax = RenderResult(False, None, "syntax", f"template syntax error: {payload}", False)
                    return results + [syntax] * (len(contexts) - len(results))
                results.append(payload)
        finally:
            if proc.is_alive():
                proc.kill()
            proc.join(5)
            parent.close()
    return results


def render(source: str, context: dict[str, Any], **limits: Any) -> RenderResult:
    return render_many(source, [context], **limits)[0]
