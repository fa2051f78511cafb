"""Day-zero fixtures (tests/dayzero/builder.py), built once per session, and an in-process stand-in for the sandbox."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


@dataclass(frozen=True)
class DayZero:
    family: str
    path: Path
    canary: Path
    """Appended to whenever the repository's code is imported (unless ONBOARD_DAYZERO_CANARY redirects it)."""

    def imported(self) -> list[str]:
        return self.canary.read_text().splitlines() if self.canary.exists() else []


@pytest.fixture(scope="session")
def dayzero(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], DayZero]:
    """`dayzero(family)` -> the day-zero checkpoint of a tests.dayzero.builder.FAMILIES key, built once."""
    from tests.dayzero.builder import build_dayzero

    root = tmp_path_factory.mktemp("dayzero")
    built: dict[str, DayZero] = {}

    def get(family: str) -> DayZero:
        if family not in built:
            canary = root / f"{family}.canary"
            built[family] = DayZero(family, build_dayzero(family, root / f"dayzero_{family}", canary=canary), canary)
        return built[family]

    return get


@pytest.fixture
def in_process_sandbox(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[dict[str, Any]]:
    """Replace onboard.reference.run_in_sandbox by a direct call (the worker's function, in this process).

    For unit tests of our side of the contract before / besides the real worker; returns the calls made.
    The repository's code then runs in the test process: point its canary elsewhere.
    """
    from onboard import reference

    monkeypatch.setenv("ONBOARD_DAYZERO_CANARY", str(tmp_path / "in-process.canary"))
    calls: list[dict[str, Any]] = []

    def run(target: str, kwargs: dict[str, Any], checkpoint: Path, policy: Any, wall_s: float | None = None) -> Any:
        calls.append({"target": target, "kwargs": kwargs, "checkpoint": checkpoint, "policy": policy})
        module, name = target.split(":")
        os.environ["ONBOARD_SANDBOX_WORKER"] = "1"  # what the real worker sets, for the call only
        try:
            return getattr(importlib.import_module(module), name)(**kwargs)
        finally:
            os.environ.pop("ONBOARD_SANDBOX_WORKER", None)

    monkeypatch.setattr(reference, "run_in_sandbox", run)
    return calls
