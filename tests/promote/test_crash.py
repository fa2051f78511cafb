"""Reliability for real: SIGKILL `onboard promote` at every point of its write, and race two promoters.

The registry must hold the whole record or nothing after each kill, and a rerun must finish the job.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest

from tests.faults import PAUSE_POINTS as POINTS
from tests.promote.workspaces import SLUG, make_workspace

FAULTS = Path(__file__).resolve().parents[1] / "faults.py"
FULL = {"files": 4, "checks": 23}  # what make_workspace's run records


def start(ws: Path, registry: Path, pause_at: str | None = None, marker: Path | None = None, seconds: str = "60"):
    """`onboard promote`, paused at `pause_at` (tests/faults.py writes `marker` there, then sleeps `seconds`)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "ONBOARD_USER": "ci-bot"}
    onboard = [str(FAULTS), "pause-at", pause_at, str(marker), seconds, "--"] if pause_at else ["-m", "onboard"]
    cmd = [sys.executable, *onboard, "promote", SLUG, "--workspace", str(ws), "--registry", str(registry)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def wait_for(path: Path, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"promote exited ({proc.returncode}) before its pause point: {proc.stderr.read()}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"promote never reached its pause point ({path.name})")
        time.sleep(0.02)


def registry_rows(db: Path) -> list[tuple[int, int, int]]:
    """(promotion id, file rows, check rows) per promotion; [] when the database was never created."""
    if not db.exists():
        return []
    with closing(sqlite3.connect(db)) as conn:
        ids = [r[0] for r in conn.execute("SELECT id FROM promotions")] if _has_table(conn) else []
        return [
            (
                i,
                conn.execute("SELECT COUNT(*) FROM promotion_files WHERE promotion_id = ?", (i,)).fetchone()[0],
                conn.execute("SELECT COUNT(*) FROM promotion_checks WHERE promotion_id = ?", (i,)).fetchone()[0],
            )
            for i in ids
        ]


def _has_table(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'promotions'").fetchone() is not None


@pytest.mark.parametrize("point", POINTS)
def test_kill_9_leaves_full_record_or_nothing_and_rerun_finishes(tmp_path, point):
    rev = make_workspace(tmp_path)
    db = tmp_path / "registry.sqlite3"
    marker = tmp_path / "paused"
    proc = start(tmp_path, db, point, marker)
    wait_for(marker, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    rows = registry_rows(db)
    committed = POINTS.index(point) >= POINTS.index("committed")
    assert rows == ([(1, FULL["files"], FULL["checks"])] if committed else []), rows
    rerun = start(tmp_path, db)
    out, err = rerun.communicate(timeout=120)
    assert rerun.returncode == 0, err
    assert ("Finished the interrupted promotion" if committed else "Promoted acme/tiny-chat") in err
    assert registry_rows(db) == [(1 if committed else rows[0][0] if rows else 1, FULL["files"], FULL["checks"])]
    assert (rev / "promotion.json").is_file() and not (rev / "promotion.pending").exists()


def test_two_promoters_of_one_revision_in_two_workspaces_exactly_one_wins(tmp_path):
    # Two checkouts of the same run (e.g. two CI jobs) sharing one registry: only the database can arbitrate.
    make_workspace(tmp_path / "a")
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    db = tmp_path / "shared.sqlite3"
    markers = [tmp_path / "a.paused", tmp_path / "b.paused"]
    # Both pause just before their transaction for the same short time, then race into BEGIN IMMEDIATE.
    procs = [start(tmp_path / w, db, "pending_written", m, seconds="1.5") for w, m in zip("ab", markers)]
    results = [p.communicate(timeout=120) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 1], results
    loser_err = next(err for p, (_, err) in zip(procs, results) if p.returncode == 1)
    assert "is already promoted" in loser_err and loser_err.startswith("Error: ")
    assert len(registry_rows(db)) == 1


def test_two_promoters_of_one_run_one_waits_out(tmp_path):
    make_workspace(tmp_path)
    db = tmp_path / "registry.sqlite3"
    marker = tmp_path / "paused"
    first = start(tmp_path, db, "locked", marker, seconds="3")
    wait_for(marker, first)
    second = start(tmp_path, db)
    _, err2 = second.communicate(timeout=120)
    _, err1 = first.communicate(timeout=120)
    assert (first.returncode, second.returncode) == (0, 1), (err1, err2)
    assert "another `onboard promote`" in err2
    assert len(registry_rows(db)) == 1
