"""Run `onboard` with a fault injected at a named point: the crash tests' wrapper, never part of the package.

    python tests/faults.py crash-after STAGE -- ARGS...             # new-model: SIGKILL right after STAGE is cached
    python tests/faults.py pause-at POINT MARKER SECONDS -- ARGS...  # promote: at POINT write MARKER, then sleep

The code under test is unmodified: each point is reached by wrapping the function that runs there, so a renamed
function fails here at start-up, and a point that is never reached leaves no marker (the test waits for it).
"""

from __future__ import annotations

import importlib
import os
import signal
import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# In the order a promotion reaches them: the revision lock, promotion.pending, the registry transaction's steps,
# the commit, promotion.json.
PAUSE_POINTS = (
    "locked",
    "pending_written",
    "txn_begun",
    "promotion_inserted",
    "files_inserted",
    "checks_inserted",
    "committed",
    "record_written",
)
# The registry's statements after which a point is reached (the transaction stays open while paused).
_AFTER_SQL = {
    "BEGIN IMMEDIATE": "txn_begun",
    "INSERT INTO promotions (": "promotion_inserted",
    "INSERT INTO promotion_files ": "files_inserted",
    "INSERT INTO promotion_checks ": "checks_inserted",
}


def crash_after(stage: str) -> None:
    """Die like `kill -9` right after `stage`'s result is cached by `onboard new-model`."""
    from onboard import pipeline

    remember = pipeline.remember

    def remember_then_die(run_dir: Path, name: str, key: str) -> None:
        remember(run_dir, name, key)
        if name == stage:
            os.kill(os.getpid(), signal.SIGKILL)

    pipeline.remember = remember_then_die


def pause_at(point: str, marker: Path, seconds: float) -> None:
    """At `point` of `onboard promote`, write `marker` (pid and point) and sleep `seconds`."""
    if point not in PAUSE_POINTS:
        raise SystemExit(f"unknown pause point {point!r}: one of {', '.join(PAUSE_POINTS)}")
    promote = importlib.import_module("onboard.promote.promote")  # the module (the package exports the function)

    def reached(name: str) -> None:
        if name == point:
            marker.write_text(f"{os.getpid()} {name}\n")
            time.sleep(seconds)

    promote._revision_lock.__enter__ = _then(promote._revision_lock.__enter__, lambda *a, **k: reached("locked"))
    promote.Registry.add = _then(promote.Registry.add, lambda *a, **k: reached("committed"))
    after_write = {promote.PENDING: "pending_written", promote.RECORD: "record_written"}
    write = promote.atomic_write_json
    promote.atomic_write_json = _then(write, lambda path, *a, **k: reached(after_write.get(Path(path).name, "")))

    class PausingConnection(sqlite3.Connection):
        def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
            cursor = super().execute(sql, *args)
            reached(_point_after(sql))
            return cursor

        def executemany(self, sql: str, *args: Any) -> sqlite3.Cursor:
            cursor = super().executemany(sql, *args)
            reached(_point_after(sql))
            return cursor

    connect = sqlite3.connect
    sqlite3.connect = lambda *a, **k: connect(*a, factory=PausingConnection, **k)  # type: ignore[assignment]


def _point_after(sql: str) -> str:
    statement = " ".join(sql.split()).upper()  # SQL keywords and SQLite's names are case-insensitive
    return next((name for start, name in _AFTER_SQL.items() if statement.startswith(start.upper())), "")


def _then(fn: Callable[..., Any], after: Callable[..., None]) -> Callable[..., Any]:
    """`fn`, then `after` with the same arguments; `fn`'s result is returned."""

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        result = fn(*args, **kwargs)
        after(*args, **kwargs)
        return result

    return wrapped


def main(argv: list[str]) -> None:
    split = argv.index("--")
    fault, onboard_args = argv[:split], argv[split + 1 :]
    if fault[:1] == ["crash-after"] and len(fault) == 2:
        crash_after(fault[1])
    elif fault[:1] == ["pause-at"] and len(fault) == 4:
        pause_at(fault[1], Path(fault[2]), float(fault[3]))
    else:
        raise SystemExit(__doc__)
    from onboard.__main__ import main as onboard_main

    sys.argv = ["onboard", *onboard_args]
    onboard_main()  # as `python -m onboard ARGS...` runs it


if __name__ == "__main__":
    sys.path[0] = str(Path(__file__).resolve().parents[1])  # the checkout, not tests/, first on the path
    main(sys.argv[1:])
