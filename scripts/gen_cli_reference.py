"""Write docs/cli.md, the command reference, from the commands' own --help (so the reference stays true).

    .venv/bin/python scripts/gen_cli_reference.py          # rewrite docs/cli.md
    .venv/bin/python scripts/gen_cli_reference.py --check  # exit 1 if docs/cli.md is stale (tests run this)
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
OUT = REPO / "docs" / "cli.md"
COMMAND = ".venv/bin/python scripts/gen_cli_reference.py"
HEADER = f"""# Command reference

Generated from each command's `--help` by `scripts/gen_cli_reference.py`: do not edit by hand; regenerate with
`{COMMAND}` (a test fails when this file is stale).

Every command prints data on stdout (`--json` for machines) and messages on stderr. Errors read `Error: …` and
`Hint: …`; `ONBOARD_DEBUG=1` shows the traceback. Exit codes: **0** ok, **1** checks found errors, **2** unusable
input or usage.

"""


def _walk(cmd: click.Command, path: list[str], ctx: click.Context) -> list[str]:
    sub_ctx = click.Context(cmd, info_name=path[-1], parent=ctx)
    out = [f"## `{' '.join(path)}`", "", "```", cmd.get_help(sub_ctx).rstrip(), "```", ""]
    if isinstance(cmd, click.Group):
        for name in cmd.list_commands(sub_ctx):
            child = cmd.get_command(sub_ctx, name)
            if child is not None:
                out += _walk(child, [*path, name], sub_ctx)
    return out


def render() -> str:
    """The whole of docs/cli.md."""
    from onboard.cli import cli

    ctx = click.Context(cli, info_name="onboard", terminal_width=100, max_content_width=100)
    lines: list[str] = []
    for name in cli.list_commands(ctx):
        lines += _walk(cli.get_command(ctx, name), ["onboard", name], ctx)
    return HEADER + "\n".join(lines).rstrip() + "\n"


def main() -> int:
    text = render()
    if "--check" in sys.argv:
        if not OUT.is_file() or OUT.read_text() != text:
            print(f"docs/cli.md is stale: regenerate it with {COMMAND}", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
