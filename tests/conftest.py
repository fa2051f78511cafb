"""Session-wide test settings.

TRITON_INTERPRET must be set before anything imports triton: kernels then run on CPU through the interpreter
(slow: keep kernel test shapes small). On a CUDA machine set ONBOARD_TEST_GPU=1 to run them natively.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

if os.environ.get("ONBOARD_TEST_GPU") != "1":
    os.environ.setdefault("TRITON_INTERPRET", "1")
# Tests never reach a real hub: the hub tests start a local server and point HF_ENDPOINT at it explicitly.
os.environ.setdefault("HF_HUB_DISABLE_UPDATE_CHECK", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("ONBOARD_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data: real third-party configs and tokenizers (read-only, not part of the repository). Skips when
    absent, in CI too: a clone is not promised that folder, and we never commit its files. The skip names what
    would run these tests."""
    if not SHARED_DATA.is_dir():
        pytest.skip(
            f"shared test data not found at {SHARED_DATA}: put the shared/ folder beside the clone "
            "(or set ONBOARD_SHARED_DATA to its data/ path) to run the real-data tests"
        )
    return SHARED_DATA


@pytest.fixture
def cli_in_process(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Callable[..., tuple[int, str, str]]:
    """`onboard ARGV` run in this process as a user runs it: offline, without ONBOARD_DEBUG, in an empty working
    folder (default output folders land in tmp_path, no ./golden_outputs of the checkout is read).
    Returns (exit code, stdout, stderr)."""
    from onboard.cli import main

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("ONBOARD_DEBUG", raising=False)
    monkeypatch.chdir(tmp_path)

    def run(*argv: str) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as info:
            main(list(argv))
        out, err = capsys.readouterr()
        return int(info.value.code or 0), out, err

    return run
