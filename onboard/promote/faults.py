"""Crash-test hook: pause at a named point of a promotion so a test can SIGKILL the process there.

Set ONBOARD_TEST_PAUSE_AT=<point> and ONBOARD_TEST_PAUSE_FILE=<path>: on reaching the point the process writes the
file and sleeps. Unset (always, outside tests), `pause` is a dictionary lookup and nothing else.
"""

from __future__ import annotations

import os
import time

POINTS = (
    "locked",
    "pending_written",
    "txn_begun",
    "promotion_inserted",
    "files_inserted",
    "checks_inserted",
    "committed",
    "record_written",
)


def pause(point: str) -> None:
    if os.environ.get("ONBOARD_TEST_PAUSE_AT") != point:
        return
    marker = os.environ.get("ONBOARD_TEST_PAUSE_FILE")
    if marker:
        with open(marker, "w") as fh:
            fh.write(f"{os.getpid()} {point}\n")
    time.sleep(float(os.environ.get("ONBOARD_TEST_PAUSE_SECONDS", "60")))
