"""`onboard signoff`: record a person's sign-off (or a waiver with a reason) on a checklist item."""

from __future__ import annotations

import click

from onboard.cli import say
from onboard.cli.options import REGISTRY_OPTION, WORKSPACE_OPTION, option


@click.command("signoff")
@click.argument("slug")
@click.argument("item")
@option("--by", required=True, help="Name of the person signing off.")
@option(
    "--note", default="", show_default=False, help="Why (required when the sign-off waives a failed or missing check)."
)
@WORKSPACE_OPTION
@option("--revision", help="Which run of SLUG (default: the latest).")
@REGISTRY_OPTION
def signoff_command(
    slug: str, item: str, by: str, note: str, workspace: str, revision: str | None, registry: str | None
) -> None:
    """Sign off checklist ITEM of SLUG's latest run, e.g. licence_reviewed or model_card_read.

    \b
    Examples:
      onboard signoff Qwen__Qwen3-8B licence_reviewed --by alice --note "Apache-2.0, LICENSE file read"
      onboard signoff Qwen__Qwen3-8B config_lint --by bob --note "rope_parameters.foo is tokenizer-only"
    """
    from pathlib import Path

    from onboard.promote import evaluate_revision, record_signoff, resolve_revision

    rev_dir = resolve_revision(Path(workspace), slug, revision)
    entry = record_signoff(rev_dir, item, by, note)
    ev = evaluate_revision(slug, workspace, revision=rev_dir.name, registry=registry)
    left = ", ".join(it.id for it in ev.state.blocking) or "none"
    say(f"{item} signed off by {entry.by} at {entry.at} ({rev_dir.name}); required items still open: {left}")
