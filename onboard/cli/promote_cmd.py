"""`onboard promote`: record a model revision in the registry once every required checklist item is ticked."""

from __future__ import annotations

import click

from onboard.cli import emit_json, say
from onboard.cli.options import REGISTRY_OPTION, WORKSPACE_OPTION, option


@click.command("promote")
@click.argument("slug")
@WORKSPACE_OPTION
@REGISTRY_OPTION
@option("--revision", help="Which run of SLUG (a revision folder name or unique prefix; default: the latest).")
@option("--by", help="Who is promoting (default: $ONBOARD_USER, else the login name).")
@option("--dry-run", is_flag=True, help="Tick the checklist and say whether promotion would pass; record nothing.")
@option("--json", "as_json", is_flag=True, help="Print the record (or the open items) as JSON on stdout.")
def promote_command(
    slug: str, workspace: str, registry: str | None, revision: str | None, by: str | None, dry_run: bool, as_json: bool
) -> None:
    """Promote the latest onboarding run of SLUG (ORG__NAME) into the registry.

    Refuses (exit 1) while any required checklist item is open or failed and names them; exit 2 when the
    workspace or registry cannot be used.

    \b
    Examples:
      onboard promote Qwen__Qwen3-8B
      onboard promote Qwen__Qwen3-8B --workspace /srv/onboard --registry /srv/onboard/registry.sqlite3 --json
    """
    from onboard.promote import PromotionRefused, evaluate_revision, promote
    from onboard.promote.checklist import state_to_dict

    if dry_run:
        ev = evaluate_revision(slug, workspace, revision=revision, registry=registry)
        if as_json:
            emit_json({"promoted": False, "dry_run": True, **state_to_dict(ev.state)})
        blocking = ", ".join(f"{it.id} ({it.status})" for it in ev.state.blocking)
        say(f"{slug} at {ev.state.revision}: " + (f"NOT ready: {blocking}" if blocking else "ready to promote"))
        say(f"checklist: {ev.checklist_md}")
        raise SystemExit(1 if blocking else 0)
    try:
        outcome = promote(slug, workspace, revision=revision, registry=registry, by=by)
    except PromotionRefused as exc:
        if as_json:
            emit_json({"promoted": False, **state_to_dict(exc.state)})
        for it in exc.state.blocking:
            say(f"  {it.status:>6}  {it.id}: {it.evidence[0] if it.evidence else ''}")
        raise
    rec = outcome.record
    if as_json:
        emit_json({"promoted": True, "resumed": outcome.resumed, "record": rec.to_dict()})
    verb = "Finished the interrupted promotion of" if outcome.resumed else "Promoted"
    say(f"{verb} {rec.model} at {rec.revision} as record #{rec.id} (by {rec.promoted_by} at {rec.promoted_at})")
    say(f"checklist: {outcome.checklist_md}\nrecord: {outcome.record_path}")
