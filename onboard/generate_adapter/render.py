"""One jinja2 Environment for every generated file (StrictUndefined: a missing value is a bug), and the small Python
source formatter the adapter template uses. Rendering is deterministic.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import jinja2

from onboard.resources import data_dir

LINE = 120


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(data_dir("templates"))),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.globals["assign"] = assign
    env.filters["pyrepr"] = py_repr
    env.filters["tuple_repr"] = lambda items: py_repr(tuple(items))
    return env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)


def py_repr(value: Any) -> str:
    """repr() with double quotes for strings (ruff/black style), recursively for tuples of strings."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, tuple):
        inner = ", ".join(py_repr(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    return repr(value)


def _split_top(text: str, sep: str) -> list[str]:
    """Split `text` at `sep` occurring outside brackets and string literals."""
    parts, depth, quote, start, i = [], 0, None, 0, 0
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i])
            start = i + len(sep)
            i = start
            continue
        i += 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


def format_expr(expr: str, indent: int, lead: int = 0) -> str:
    """`expr` laid out from column `indent`: as is when it fits, else calls broken one argument per line and
    conditional expressions split at `if` / `else` (the layout ruff format would choose)."""
    if indent + lead + len(expr) + 1 <= LINE:  # +1: a trailing comma or bracket
        return expr
    keyword = re.match(r"(\w+)=(?!=)", expr)
    if keyword:  # a keyword argument: lay out its value after `name=`
        name = keyword.group(0)
        return name + format_expr(expr[len(name) :], indent, lead + len(name))
    pad, inner = " " * indent, " " * (indent + 4)
    branches = _split_top(expr, " if ")
    if len(branches) >= 2 and indent + 4 + len(expr) <= LINE:  # parenthesised, on one line inside
        return f"(\n{inner}{expr}\n{pad})"
    if len(branches) >= 2:  # a if c1 else b if c2 else c: one line per value and per condition
        body = [format_expr(branches[0], indent + 4)]
        for branch in branches[1:]:
            cond, other = _split_top(branch, " else ")
            body += [f"if {cond}", f"else {format_expr(other, indent + 4, 5)}"]
        return "(\n" + "".join(f"{inner}{b}\n" for b in body) + f"{pad})"
    head, _, rest = expr.partition("(")
    if not rest.endswith(")") or (head and not head.replace(".", "").replace("_", "").isalnum()):
        return expr
    args = _split_top(rest[:-1], ",")
    lines = [f"{inner}{format_expr(a, indent + 4)},\n" for a in args if a]
    return f"{head}(\n" + "".join(lines) + f"{pad})"


def assign(target: str, expr: str, indent: int) -> str:
    """`target = expr` at `indent`, wrapped like format_expr when too long (no leading indent on line one)."""
    return f"{target} = {format_expr(expr, indent, len(target) + 3)}"
