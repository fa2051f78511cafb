"""Regenerate the CLI reference in README.md from the commands' own --help (so the README stays true).

    .venv/bin/python scripts/gen_cli_reference.py          # rewrite README.md
    .venv/bin/python scripts/gen_cli_reference.py --check  # exit 1 if README.md is stale (tests run this)
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
START, END = "<!-- cli-reference:start -->", "<!-- cli-reference:end -->"


def _walk(cmd: click.Command, path: list[str], ctx: click.Context) -> list[str]:
    sub_ctx = click.Context(cmd, info_name=path[-1], parent=ctx)
    out = [f"#### `{' '.join(path)}`", "", "```", cmd.get_help(sub_ctx).rstrip(), "```", ""]
    if isinstance(cmd, click.Group):
        for name in cmd.list_commands(sub_ctx):
            child = cmd.get_command(sub_ctx, name)
            if child is not None:
                out += _walk(child, [*path, name], sub_ctx)
    return out


def render() -> str:
    from onboard.cli import cli

    ctx = click.Context(cli, info_name="onboard", terminal_width=100, max_content_width=100)
    lines: list[str] = []
    for name in cli.list_commands(ctx):
        lines += _walk(cli.get_command(ctx, name), ["onboard", name], ctx)
    return "\n".join(lines).rstrip() + "\n"


def main() -> int:
    readme = REPO / "README.md"
    text = readme.read_text()
    if START not in text or END not in text:
        print(f"README.md lacks the {START} / {END} markers", file=sys.stderr)
        return 2
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{START}\n{render()}{END}{tail}"
    if "--check" in sys.argv:
        if new != text:
            print("README.md CLI reference is stale: run .venv/bin/python scripts/gen_cli_reference.py", file=sys.stderr)
            return 1
        return 0
    readme.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
