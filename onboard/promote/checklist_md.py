"""Render a model's checklist (`checklists/<slug>.md`) and store its statuses (`<revision>/checklist.json`)."""

from __future__ import annotations

import re
from pathlib import Path

from onboard.fsutil import atomic_write, atomic_write_json
from onboard.promote.checklist import SATISFIED, ChecklistState, state_to_dict

MARKS = {"done": "✅", "signed_off": "✍️", "failed": "❌", "open": "⬜", "not_applicable": "➖"}
LABELS = {"done": "done", "signed_off": "signed off", "failed": "FAILED", "open": "open", "not_applicable": "n/a"}


def cell(text: str) -> str:
    """Markdown table cells cannot hold pipes or newlines."""
    return text.replace("|", "\\|").replace("\n", " ")


def checklist_table(state: ChecklistState) -> list[str]:
    """The Markdown status table, one row per item with its evidence (the checklist's and the report's)."""
    lines = ["| | Item | Required | Status | Owner | Evidence |", "|---|---|---|---|---|---|"]
    for it in state.items:
        evidence = "<br>".join(cell(e) for e in it.evidence) or "—"
        lines.append(
            f"| {MARKS.get(it.status, '?')} | **{cell(it.title)}** (`{it.id}`) | {'yes' if it.required else 'no'} | "
            f"{LABELS.get(it.status, it.status)} | {cell(it.owner) or '—'} | {evidence} |"
        )
    return lines


def render_checklist_md(state: ChecklistState) -> str:
    """The per-model checklist: a status table with evidence, then what to run for every open item."""
    done = sum(1 for it in state.items if it.status in SATISFIED)
    verdict = "READY to promote" if state.ready else f"NOT ready: {len(state.blocking)} required item(s) open"
    lines = [
        f"# Day-zero checklist: {state.slug}",
        "",
        f"Revision `{state.revision}` · evaluated {state.evaluated_at} · {done}/{len(state.items)} items ticked · "
        f"**{verdict}**",
        "",
        *checklist_table(state),
    ]
    todo = [it for it in state.items if it.status in ("open", "failed")]
    if todo:
        lines += ["", "## To do", ""]
        for it in todo:
            # The checklist's command with this run's slug and revision filled in.
            command = re.sub(r"\bREV\b", state.revision, re.sub(r"\bSLUG\b", state.slug, it.command))
            need = "required" if it.required else "optional"
            lines.append(f"- [ ] `{it.id}` ({need}, {it.owner or 'anyone'}): `{command}`")
        lines += ["", "What to do when a check fails: see docs/runbook.md, section of the same name."]
    return "\n".join(lines) + "\n"


def write_checklist(state: ChecklistState, rev_dir: Path, workspace: Path) -> tuple[Path, Path]:
    """Write `<rev_dir>/checklist.json` and `<workspace>/checklists/<slug>.md`; returns both paths."""
    json_path = rev_dir / "checklist.json"
    md_path = workspace / "checklists" / f"{state.slug}.md"
    atomic_write_json(json_path, state_to_dict(state))
    atomic_write(md_path, render_checklist_md(state))
    return json_path, md_path
