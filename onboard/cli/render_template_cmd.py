"""`onboard render-template`: render a chat template with exactly the variables of a JSON context."""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from onboard.cli import say
from onboard.cli.options import FILE, REVISION_OPTION, option, seconds


@click.command("render-template")
@click.argument("template_or_source")
@option(
    "--context",
    "context_file",
    required=True,
    type=FILE,
    help="JSON object: messages, tools, add_generation_prompt, bos_token, eos_token, anything else.",
)
@option("--template-name", help="Named template of the repo (e.g. tool_use).")
@option(
    "--polyfill",
    type=click.Choice(["system-merge"]),
    help="llama.cpp's fix: fold a leading system message into the first user turn.",
)
@REVISION_OPTION
@option(
    "--now",
    type=click.DateTime(["%Y-%m-%d", "%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"]),
    help="What strftime_now returns (default: the frozen 2025-01-15 12:00), e.g. to reproduce a dated render.",
)
@option("--timeout", "timeout_s", type=seconds(0.1), default=10.0, help="Seconds before giving up.")
def render_template_command(
    template_or_source: str,
    context_file: Path,
    template_name: str | None,
    polyfill: str | None,
    revision: str | None,
    now: datetime | None,
    timeout_s: float,
) -> None:
    """Render TEMPLATE_OR_SOURCE (a .jinja file, or a folder / hub repo with a chat template) to stdout.

    Nothing is added: no trailing newline, no default variables. Sandboxed like transformers'
    apply_chat_template, with a frozen clock for strftime_now.

    \b
    Examples:
      onboard render-template ./my-model --context ctx.json
      onboard render-template gemma.jinja --context ctx.json --polyfill system-merge
    """
    from onboard.fsutil import read_json
    from onboard.verify_tokenizer.render import render_for_cli
    from onboard.verify_tokenizer.template_lookup import load_template

    example = 'a JSON object, e.g. {"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": true}'
    template, file_notes = load_template(template_or_source, template_name, revision)
    context = read_json(context_file, dict[str, Any], f"--context takes {example}")
    text, notes = render_for_cli(template, context, polyfill, timeout_s, now)
    for note in file_notes + notes:
        say(note)
    sys.stdout.write(text)
    sys.stdout.flush()
