"""The docs say what the code does: generated pages are current, hand-written lists match the code, the README stays
a short front door whose links resolve. (docs/coverage.md is checked by tests/generate/test_compose_coverage.py:
recomputing it builds every tiny architecture.)"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from onboard.inspect_checkpoint.features import FEATURES

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
README_MAX_LINES = 250  # issue 44: a front door, not the manual (that is docs/)
ARCHITECTURE = REPO / "docs" / "architecture.md"
PATH_PATTERN = r"`((?:docs|benchmarks|scripts|tests|onboard|checklists|templates|adapters|kernels)/[^`\s]*)`"


def test_cli_reference_is_current() -> None:
    """docs/cli.md is regenerated from the commands' --help and compared; the failure names the command to run."""
    r = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen_cli_reference.py"), "--check"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "100"},
    )
    assert r.returncode == 0, r.stderr


def test_feature_vocabulary_matches_code() -> None:
    text = (REPO / "docs" / "inspect.md").read_text()
    section = text.split("## Feature vocabulary", 1)[1].split("\n#", 1)[0]
    listed = set(re.findall(r"`([a-z_0-9:<>]+)`", section))
    assert listed == set(FEATURES), f"docs/inspect.md lists {sorted(listed ^ set(FEATURES))} differently from FEATURES"


def test_readme_is_short() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines (at most {README_MAX_LINES}): move detail to docs/"


def _missing_paths(doc: Path) -> list[str]:
    named = set(re.findall(PATH_PATTERN, doc.read_text()))
    assert named, f"{doc}: no paths found (has the pattern stopped matching?)"
    return sorted(p for p in named if "<" not in p and not (REPO / p.rstrip("/")).exists())


def test_paths_the_readme_names_exist() -> None:
    named = set(re.findall(PATH_PATTERN, README.read_text()))
    assert {"docs/cli.md", "docs/coverage.md", "docs/architecture.md", "benchmarks/README.md"} <= named, named
    missing = _missing_paths(README)
    assert not missing, f"README.md names paths that do not exist: {missing}"


def test_paths_the_architecture_map_names_exist() -> None:
    missing = _missing_paths(ARCHITECTURE)
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}; update the map"
