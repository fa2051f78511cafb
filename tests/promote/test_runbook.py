"""docs/runbook.md and checklists/day-zero.yaml must agree: every item has a section naming a real command."""

from __future__ import annotations

import re
from pathlib import Path

from onboard.cli import COMMANDS
from onboard.promote import load_checklist

RUNBOOK = Path(__file__).resolve().parents[2] / "docs" / "runbook.md"


def sections() -> dict[str, str]:
    text = RUNBOOK.read_text(encoding="utf-8")
    parts = re.split(r"^### `([a-z0-9_]+)`", text, flags=re.M)
    return {parts[i]: parts[i + 1].split("\n## ")[0] for i in range(1, len(parts), 2)}


def test_every_checklist_item_has_a_runbook_section_with_its_command():
    found = sections()
    for item in load_checklist().items:
        assert item.id in found, f'docs/runbook.md needs a section "### `{item.id}`: …" (see checklists/day-zero.yaml)'
        body = found[item.id]
        assert re.search(r"^- Command: `onboard [^`]+`", body, re.M), f"{item.id}: no '- Command: `onboard …`' line"
        assert f"`{item.command}`" in body, f"{item.id}: the checklist's command `{item.command}` is not in its section"
        assert "When it fails" in body, f"{item.id}: say what to do when it fails"
        for ref in item.ticked_by:
            assert f"`{ref.check}`" in body, f"{item.id}: name the check `{ref.check}` that ticks it"


def test_runbook_has_no_sections_for_items_that_do_not_exist():
    assert set(sections()) == {it.id for it in load_checklist().items}


def test_every_onboard_command_in_runbook_and_checklist_exists():
    text = RUNBOOK.read_text(encoding="utf-8") + "\n".join(it.command for it in load_checklist().items)
    used = set(re.findall(r"\bonboard ([a-z][a-z-]+)", text))
    assert used, "the runbook names no onboard commands"
    assert used <= set(COMMANDS), f"unknown onboard subcommands: {sorted(used - set(COMMANDS))}"
