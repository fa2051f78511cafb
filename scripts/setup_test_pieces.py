#!/usr/bin/env python3
"""Set up the optional pieces the test suite uses (tests/ci.py PIECES), as `make test` does before running it.

What pip can install (vLLM's CPU build, llama.cpp) is installed by its own idempotent script, one line each saying
what and how long the first time takes. What needs root, and the real third-party data, are named once with the
command that provides them: their tests skip without them (and fail under CI=true, which installs the root pieces).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.ci import PIECES, hidden  # noqa: E402  (the repository root first on the path)


def main() -> int:
    skipped = hidden()
    absent = [p for p in PIECES.values() if (p.root or not p.first_time) and (p.name in skipped or not p.present())]
    root = [p for p in absent if p.root]
    if root:
        names = ", ".join(p.what for p in root)
        packages = " ".join(p.command.rsplit(" ", 1)[-1] for p in root)
        print(f"test set-up: not installed (needs root): {names}. Their tests skip; to run them: "
              f"sudo apt-get install -y {packages}")  # fmt: skip
    for piece in (p for p in absent if not p.root):
        print(f"test set-up: {piece.what} not found; its tests skip. To run them: {piece.command}")
    for piece in (p for p in PIECES.values() if p.first_time and p.name not in skipped):
        if piece.installed():
            print(f"test set-up: {piece.what}: installed")
            continue
        print(f"test set-up: installing {piece.what} with {piece.command} ({piece.first_time})", flush=True)
        start = time.monotonic()
        done = subprocess.run(["bash", str(REPO / piece.command)], cwd=REPO)
        if done.returncode != 0:
            print(f"Error: {piece.command} failed (exit {done.returncode}); its output is above", file=sys.stderr)
            return 1
        print(f"test set-up: {piece.what} installed in {time.monotonic() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
