"""`onboard registry list|show`: read the promotion registry."""

from __future__ import annotations

import click

from onboard.cli import emit_json, say
from onboard.cli.options import REGISTRY_OPTION, WORKSPACE_OPTION, option


def _open(registry: str | None, workspace: str):  # -> Registry, imported lazily
    from pathlib import Path

    from onboard.promote import Registry, default_registry_path

    return Registry(registry or default_registry_path(Path(workspace)))


@click.group("registry")
def registry_group() -> None:
    """Promotion records: what was promoted, when, by whom, on what evidence.

    \b
    Examples:
      onboard registry list
      onboard registry show Qwen/Qwen3-8B --revision 3f1c2a9 --json
    """


@registry_group.command("list")
@click.argument("model", required=False)
@REGISTRY_OPTION
@WORKSPACE_OPTION
@option("--json", "as_json", is_flag=True, help="Print the rows as JSON on stdout.")
def list_command(model: str | None, registry: str | None, workspace: str, as_json: bool) -> None:
    """List promotions, newest first (only MODEL's when given: org/name or slug)."""

    reg = _open(registry, workspace)
    rows = reg.list(model)
    if as_json:
        emit_json(rows)
        return
    if not rows:
        say(f"no promotions in {reg.path}")
        return
    click.echo(f"{'#':>4}  {'model':<40} {'revision':<12} {'checks':>7}  {'by':<16} at")
    for r in rows:
        checks = f"{r.checks_passed}/{r.checks_total}"
        click.echo(f"{r.id:>4}  {r.model:<40} {r.revision[:12]:<12} {checks:>7}  {r.promoted_by:<16} {r.promoted_at}")


@registry_group.command("show")
@click.argument("model")
@option("--revision", help="A revision (full sha or prefix); default: the latest promotion of MODEL.")
@REGISTRY_OPTION
@WORKSPACE_OPTION
@option("--json", "as_json", is_flag=True, help="Print the full record as JSON on stdout.")
def show_command(model: str, revision: str | None, registry: str | None, workspace: str, as_json: bool) -> None:
    """Show one promotion record of MODEL (org/name or slug)."""

    rec = _open(registry, workspace).show(model, revision)
    if as_json:
        emit_json(rec)
        return
    failed = [c for c in rec.checks if not c.passed]
    lines = [
        f"record #{rec.id}: {rec.model} at {rec.revision}",
        f"  promoted by {rec.promoted_by} at {rec.promoted_at}"
        + (f" (supersedes #{rec.supersedes})" if rec.supersedes else ""),
        f"  profile {rec.profile_sha256 or '-'}",
        f"  tokenizer {rec.tokenizer_sha256 or '-'}",
        f"  goldens {rec.golden_sha256 or '-'} ({rec.golden_dir or 'no folder'})",
        f"  files: {len(rec.files)} ({sum(1 for f in rec.files if f.sha256)} hashed)",
        f"  checks: {len(rec.checks) - len(failed)}/{len(rec.checks)} passed"
        + (f"; failed (optional): {', '.join(c.name for c in failed)}" if failed else ""),
        "  sign-offs: " + (", ".join(f"{s.item} by {s.by}" for s in rec.signoffs) or "none"),
        "  versions: " + ", ".join(f"{k} {v}" for k, v in rec.versions.items()),
        f"  validated on: {rec.hardware.get('validated_on') or 'unknown'}",
    ]
    click.echo("\n".join(lines))
