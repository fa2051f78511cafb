"""The onboarding report: `<revision>/report.md`, plus `report.html` with inline SVG plots and tables.

The HTML has no scripts and loads nothing (no external JS, CSS or fonts): it reads the same from a laptop on a plane.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from html import escape
from pathlib import Path

from onboard.fsutil import atomic_write, clean_os_errors
from onboard.promote.checklist import LABELS, ChecklistState, cell, checklist_table
from onboard.promote.report_data import ReportData, Table, gather
from onboard.promote.stage_results import load_stage_results, resolve_revision

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;max-width:1100px;color:#111827;
 padding:0 16px;line-height:1.45}
h1{font-size:1.6rem;margin-bottom:4px}h2{font-size:1.2rem;margin-top:32px;border-bottom:1px solid #e5e7eb}
.verdict{display:inline-block;padding:6px 12px;border-radius:6px;font-weight:600;margin:8px 0}
.ready{background:#dcfce7;color:#166534}.blocked{background:#fee2e2;color:#991b1b}
table{border-collapse:collapse;width:100%;font-size:.9rem;margin:8px 0}
th,td{border:1px solid #e5e7eb;padding:4px 8px;text-align:left;vertical-align:top}th{background:#f9fafb}
tr.done td.status,tr.signed_off td.status{color:#166534}tr.failed td.status{color:#991b1b;font-weight:600}
tr.open td.status{color:#92400e}tr.not_applicable td.status{color:#6b7280}
.plots{display:flex;flex-wrap:wrap;gap:20px;align-items:flex-start}figure{margin:0;border:1px solid #e5e7eb;border-radius:6px;padding:8px}
figcaption{font-size:.85rem;color:#4b5563;max-width:520px}
svg .grid{stroke:#f3f4f6}svg .axis{stroke:#9ca3af}svg .limit{stroke:#dc2626;stroke-dasharray:4 3}
svg text{font-family:system-ui,sans-serif;fill:#374151}svg .tick,svg .legend{font-size:11px}svg .label{font-size:12px}
dl{display:grid;grid-template-columns:max-content auto;gap:2px 16px}dt{color:#6b7280}dd{margin:0}
.dot{display:inline-block;width:11px;height:11px;border-radius:50%;background:#d1d5db}
tr.done .dot{background:#16a34a}tr.signed_off .dot{background:#2563eb}tr.failed .dot{background:#dc2626}
tr.open .dot{background:#f59e0b}tr.not_applicable .dot{background:#e5e7eb}
code{background:#f3f4f6;padding:1px 4px;border-radius:3px;font-size:.85em}.missing li{color:#92400e}
"""


@dataclass(frozen=True)
class ReportPaths:
    markdown: Path
    html: Path


@clean_os_errors
def render_report(
    slug: str,
    workspace: Path | str = ".",
    *,
    revision: str | None = None,
    state: ChecklistState | None = None,
) -> ReportPaths:
    """Write report.md and report.html for a run of `slug`; evaluates the checklist unless `state` is given."""
    from onboard.promote.promote import evaluate_revision

    rev_dir = resolve_revision(Path(workspace), slug, revision)
    if state is None:
        state = evaluate_revision(slug, workspace, revision=rev_dir.name).state
    data = gather(state, load_stage_results(rev_dir))
    paths = ReportPaths(rev_dir / "report.md", rev_dir / "report.html")
    atomic_write(paths.markdown, render_markdown(data))
    atomic_write(paths.html, render_html(data))
    return paths


def _verdict(state: ChecklistState) -> str:
    if state.ready:
        return "READY to promote"
    return "NOT ready: " + ", ".join(f"{it.id} ({LABELS[it.status]})" for it in state.blocking)


def render_markdown(data: ReportData) -> str:
    state = data.state
    lines = [f"# Onboarding report: {state.slug}", "", f"Revision `{state.revision}` · **{_verdict(state)}**", ""]
    lines += [f"- **{k}**: {v}" for k, v in data.facts]
    lines += ["", "## Checklist", "", *checklist_table(state)]
    for table in data.tables:
        lines += ["", f"## {table.title}", "", "| " + " | ".join(table.header) + " |", "|" + "---|" * len(table.header)]
        lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in table.rows]
    if data.plots:
        lines += ["", "## Plots (see report.html)", ""]
        lines += [f"- **{p.title}**: {p.caption}" for p in data.plots]
    if data.missing:
        lines += ["", "## Not known yet", ""] + [f"- {m}" for m in data.missing]
    return "\n".join(lines) + "\n"


def _table_html(table: Table) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in table.header)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in table.rows)
    slug = table.title.lower().replace(" ", "-")
    return f'<h2>{escape(table.title)}</h2>\n<table id="table-{slug}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def render_html(data: ReportData) -> str:
    state = data.state
    generated = datetime.now(timezone.utc).isoformat(timespec="seconds")
    facts = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in data.facts)
    rows = "".join(
        f'<tr class="{it.status}"><td><span class="dot"></span></td><td><b>{escape(it.title)}</b><br><code>{escape(it.id)}</code></td>'
        f'<td>{"yes" if it.required else "no"}</td><td class="status">{LABELS[it.status]}</td>'
        f"<td>{'<br>'.join(escape(e) for e in it.evidence) or '—'}</td><td>{escape(it.owner)}</td></tr>"
        for it in state.items
    )
    checklist = (
        '<h2>Checklist</h2>\n<table id="table-checklist"><thead><tr><th></th><th>item</th><th>required</th>'
        f"<th>status</th><th>evidence</th><th>owner</th></tr></thead><tbody>{rows}</tbody></table>"
    )
    figures = "".join(
        f'<figure id="{p.id}">{p.svg}<figcaption><b>{escape(p.title)}</b>: {escape(p.caption)}</figcaption></figure>'
        for p in data.plots
    )
    missing = "".join(f"<li>{escape(m)}</li>" for m in data.missing)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>Onboarding report: {escape(state.slug)}</title><style>{CSS}</style></head><body>",
        f"<h1>Onboarding report: {escape(state.slug)}</h1>",
        f"<div>Revision <code>{escape(state.revision)}</code> · generated {generated}</div>",
        f'<div class="verdict {"ready" if state.ready else "blocked"}" id="verdict">{escape(_verdict(state))}</div>',
        f"<dl>{facts}</dl>" if facts else "",
        checklist,
        f'<h2>Plots</h2>\n<div class="plots">{figures}</div>' if figures else "",
        *(_table_html(t) for t in data.tables),
        f'<h2>Not known yet</h2>\n<ul class="missing">{missing}</ul>' if missing else "",
        "</body></html>",
    ]
    return "\n".join(p for p in parts if p) + "\n"
