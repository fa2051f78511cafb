"""Progress for `onboard new-model`: a live rich display on a terminal, plain lines in CI (both on stderr)."""

from __future__ import annotations

import sys
import time
from typing import Any

_MARK = {"ok": "✓", "cached": "✓", "failed": "✗", "blocked": "·", "error": "✗"}


class Progress:
    def __init__(self, stages: list[str], quiet: bool = False) -> None:
        self.stages = stages
        self.quiet = quiet
        self.console: Any = None
        if not quiet and sys.stderr.isatty():
            from rich.console import Console

            self.console = Console(stderr=True)
        self._started = 0.0
        self._status: Any = None

    def start(self, stage: str) -> None:
        self._started = time.perf_counter()
        n = self.stages.index(stage) + 1
        if self.console is not None:
            self._status = self.console.status(f"[{n}/{len(self.stages)}] {stage} …")
            self._status.start()
        elif not self.quiet:
            print(f"[{n}/{len(self.stages)}] {stage} …", file=sys.stderr, flush=True)

    def done(self, stage: str, outcome: str, detail: str = "") -> float:
        seconds = time.perf_counter() - self._started
        if self._status is not None:
            self._status.stop()
            self._status = None
        line = f"  {_MARK.get(outcome, '?')} {stage}: {outcome} ({seconds:.1f} s){' — ' + detail if detail else ''}"
        if self.console is not None:
            colour = {"ok": "green", "cached": "green", "failed": "red", "error": "red"}.get(outcome, "yellow")
            self.console.print(f"[{colour}]{line}[/{colour}]", highlight=False)
        elif not self.quiet:
            print(line, file=sys.stderr, flush=True)
        return seconds

    def skip(self, stage: str, reason: str) -> None:
        if not self.quiet:
            print(f"  · {stage}: blocked — {reason}", file=sys.stderr, flush=True)
