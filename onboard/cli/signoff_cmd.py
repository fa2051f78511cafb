"""`onboard signoff`: record a person's sign-off (or a waiver with a reason) on a checklist item."""

from __future__ import annotations

import click


@click.command("signoff")
@click.argument("slug")
@click.argument("item")
@click.option("--by", required=True, help="Name of the person signing off.")
@click.option("--note", default="", help="Why (required when the sign-off waives a failed or missing check).")
@click.option("--workspace", type=click.Path(file_okay=False), default=".", show_default=True)
@click.option("--revision", help="Which run of SLUG (default: the latest).")
@click.option("--registry", type=click.Path(dir_okay=False), help="Registry database (to tick against promotions).")
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

    from onboard.cli.output import say
    from onboard.promote import evaluate_revision, record_signoff, resolve_revision

    rev_dir = resolve_revision(Path(workspace), slug, revision)
    entry = record_signoff(rev_dir, item, by, note)
    ev = evaluate_revision(slug, workspace, revision=rev_dir.name, registry=registry)
    left = ", ".join(it.id for it in ev.state.blocking) or "none"
    say(f"{item} signed off by {entry.by} at {entry.at} ({rev_dir.name}); required items still open: {left}")
