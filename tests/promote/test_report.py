"""The onboarding report: Markdown and offline HTML, checked as text and rendered in headless Chromium."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from onboard.promote.report import render_report
from tests.promote.workspaces import SLUG, make_workspace

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip


def test_html_is_self_contained_and_has_every_plot_and_table(tmp_path):
    make_workspace(tmp_path, failing={"validate": ("long_context_parity",)})
    paths = render_report(SLUG, tmp_path)
    html = paths.html.read_text()
    assert not re.search(r"<script|<link|@import|url\(|src=\"http", html), "the report must load nothing"
    for plot in ("plot-kl", "plot-max_logprob_error", "plot-prefill", "plot-memory", "plot-layers"):
        assert f'id="{plot}"' in html
    for table in ("table-checklist", "table-stages", "table-performance", "table-failed-checks"):
        assert f'id="{table}"' in html
    assert "NOT ready: long_context (FAILED)" in html
    md = paths.markdown.read_text()
    assert "**NOT ready: long_context (FAILED)**" in md
    assert "| validate | long_context_parity | required | long_context_parity: FAILED |" in md
    assert "## Not known yet" not in md


def test_partial_run_says_what_is_missing(tmp_path):
    rev = make_workspace(tmp_path, stages=("generate", "verify-tokenizer"))
    profile = json.loads((rev / "profile.json").read_text())
    del profile["memory"]
    (rev / "profile.json").write_text(json.dumps(profile))
    paths = render_report(SLUG, tmp_path)
    md = paths.markdown.read_text()
    assert "validate.json has no `positions`" in md
    assert "no `performance.prefill_by_length`" in md
    assert "profile.json has no `memory` plan" in md
    assert "| validate | — | not run |" in md
    assert "<svg" not in paths.html.read_text()


def test_malformed_validate_keys_are_skipped_not_fatal(tmp_path):
    rev = make_workspace(tmp_path)
    data = json.loads((rev / "validate.json").read_text())
    data["positions"] = [{"prompt": 0, "index": "x", "kl": None}, "junk", {"prompt": 0, "index": 1, "kl": 0.5}]
    data["performance"] = {"prefill_by_length": "fast", "tpot_ms": "n/a", "itl_p50_ms": 7}
    data["per_layer_error"] = [{"layer": 0}]
    (rev / "validate.json").write_text(json.dumps(data))
    md = render_report(SLUG, tmp_path).markdown.read_text()
    assert "KL divergence along positions**: worst 0.5 at position 1" in md
    assert "positions carry no numeric `max_logprob_error`" in md
    assert "| itl_p50_ms | 7 |" in md and "tpot_ms" not in md
    assert "per-layer error not known" in md


def _chromium(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    profile = tmp_path / "chromium-profile"
    cmd = [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


@pytest.mark.browser
def test_html_report_renders_in_headless_chromium(tmp_path):
    make_workspace(tmp_path / "ws", failing={"validate": ("stop_set",)})
    html = render_report(SLUG, tmp_path / "ws").html
    r = _chromium(["--dump-dom", html.as_uri()], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    dom = r.stdout
    svgs = re.findall(r'<svg class="plot" data-kind="(\w+)" data-count="(\d+)"', dom)
    assert len(svgs) == 5 and all(int(n) > 0 for _, n in svgs), svgs
    lines = re.findall(r'<polyline class="series" data-name="[^"]*" data-points="(\d+)"[^>]*points="([^"]+)"', dom)
    assert len(lines) >= 6 and all(int(n) >= 4 and len(p.split()) == int(n) for n, p in lines)
    assert len(re.findall(r'<rect class="bar" data-value="[0-9.e-]+"', dom)) == 2
    for table in ("checklist", "stages", "performance", "failed-checks"):
        body = re.search(rf'<table id="table-{table}">.*?<tbody>(.*?)</tbody>', dom, re.S)
        assert body and body.group(1).count("<tr") >= 1, table
    assert dom.count('<tr class="failed">') == 1 and "NOT ready: stop_set (FAILED)" in dom
    shot = tmp_path / "report.png"
    r = _chromium([f"--screenshot={shot}", "--window-size=1200,2400", html.as_uri()], tmp_path)
    assert r.returncode == 0 and shot.stat().st_size > 50_000  # a blank page is a few KB
