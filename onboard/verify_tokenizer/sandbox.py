"""Render chat templates in a child process: bounded time, bounded output, clean errors for hostile templates.

A Jinja loop costs no Python call per iteration the sandbox could intercept, so a thread cannot be stopped; a
forked child can. The child streams one result per render back; the parent waits at most `timeout_s` for each and
kills the child (restarting it for the remaining renders) when one overruns.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

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


def _render_one(template: Any, clock: Any, context: dict[str, Any], max_output: int) -> RenderResult:
    import jinja2

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
    import jinja2

    from onboard.verify_tokenizer.chat_template import ClockRead, build_environment

    _limit_memory()
    clock = ClockRead()
    try:
        template = (build_environment(clock, now) if now else build_environment(clock)).from_string(source)
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
    """Render `source` once per context. Never raises for template problems: each result says what happened.

    `now` is what strftime_now sees (default: chat_template.FROZEN_NOW).
    """
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
