"""Session fixtures over the tiny-checkpoint factory. Register with `pytest_plugins = ["tests.tiny.fixtures"]`
in tests/conftest.py (or import the fixture names into a test module).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """`tiny_checkpoint(model_type)` -> folder of its tiny checkpoint, built once per session (float32, seed 0)."""
    from tests.tiny.factory import make_tiny_checkpoint

    root = tmp_path_factory.mktemp("tiny")
    built: dict[str, Path] = {}

    def get(model_type: str) -> Path:
        if model_type not in built:
            built[model_type] = make_tiny_checkpoint(model_type, root / model_type)
        return built[model_type]

    return get


@pytest.fixture(scope="session")
def tiny_ground_truth(tiny_checkpoint: Callable[[str], Path]) -> Callable[[str], dict[str, Any]]:
    """`tiny_ground_truth(model_type)` -> tests.tiny.ground_truth.ground_truth of its tiny checkpoint, memoized."""
    from tests.tiny.ground_truth import ground_truth

    measured: dict[str, dict[str, Any]] = {}

    def get(model_type: str) -> dict[str, Any]:
        if model_type not in measured:
            measured[model_type] = ground_truth(model_type, tiny_checkpoint(model_type))
        return measured[model_type]

    return get
