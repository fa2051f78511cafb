"""Where packaged data lives: inside the wheel (onboard/_data) or, in a checkout, at the repo root."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
_REPO = _PACKAGE.parent


def data_dir(name: str) -> Path:
    """`templates`, `checklists`, …: the packaged copy if installed from a wheel, else the checkout's."""
    packaged = _PACKAGE / "_data" / name
    if packaged.is_dir():
        return packaged
    return _REPO / name


def package_data(name: str) -> Path:
    """A data file shipped inside the package itself (onboard/data/...)."""
    return _PACKAGE / "data" / name
