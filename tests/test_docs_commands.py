"""Every `onboard …` command line in README.md and docs/*.md names a command that exists and options it takes.

docs/cli.md is generated from --help (scripts/gen_cli_reference.py), but the README's tour, the other docs pages,
the runbook and the webhook guide are written by hand: a renamed option would leave them telling users to type
something that fails. Only the words are checked (the command path and every --option), nothing is run.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click

from onboard.cli import cli

REPO = Path(__file__).resolve().parent.parent
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# A code-block line or an inline code span that starts with `onboard `; a pipe, redirect or second command ends it.
LINE = re.compile(r"(?m)^\s*(?:\$ )?(onboard [^\n`#]*)|`(onboard [^`]*)`")
PLACEHOLDER = re.compile(r"[A-Z]{2,}|…|\.\.\.")


def command_lines(text: str) -> list[str]:
    lines = []
    for block, span in LINE.findall(text):
        line = re.split(r" && | \| | > |;", block or span)[0].rstrip("\\ ").strip()
        lines.append(line)
    return lines


def problems_of(line: str) -> list[str]:
    try:
        words = shlex.split(line)[1:]
    except ValueError:  # an unbalanced quote in prose: not a command line
        return []
    ctx = click.Context(cli)
    command: click.Command = cli
    rest = words
    while isinstance(command, click.Group) and rest and not rest[0].startswith("-"):
        names = rest[0].split("|")  # `queue list|retry`: each alternative must exist
        found = [command.get_command(ctx, name) for name in names]
        if any(f is None for f in found):
            return [] if PLACEHOLDER.search(rest[0]) else [f"no command {rest[0]!r} under {command.name!r}"]
        command, rest = found[0], rest[1:]  # type: ignore[assignment]
    options = {o for p in command.params for o in (*getattr(p, "opts", ()), *getattr(p, "secondary_opts", ()))}
    options |= {"--help", "-h"} | ({"--version"} if command is cli else set())
    return [
        f"{word.split('=')[0]} is not an option of `{command.name}`"
        for word in rest
        if word.startswith("--") and word.split("=")[0] not in options and not PLACEHOLDER.search(word)
    ]


def test_documented_command_lines_parse() -> None:
    lines = {(doc.name, line) for doc in DOCS for line in command_lines(doc.read_text(encoding="utf-8"))}
    assert len({doc for doc, _ in lines}) >= 3 and len(lines) > 50, lines  # README, runbook, webhook guide at least
    bad = {f"{doc}: {line}": found for doc, line in sorted(lines) if (found := problems_of(line))}
    assert not bad, f"command lines in the docs that would fail: {bad}"


def test_the_checker_catches_a_renamed_option_and_a_missing_command() -> None:
    assert problems_of("onboard validate ./ckpt --golden g --engine llama.cpp") == []
    assert problems_of("onboard validate ./ckpt --goldens g") == ["--goldens is not an option of `validate`"]
    assert problems_of("onboard queue list|purge") == ["no command 'list|purge' under 'queue'"]
    assert problems_of("onboard golden record ORG/NAME --out DIR") == []
