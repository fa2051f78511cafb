"""Session-wide test settings.

TRITON_INTERPRET must be set before anything imports triton: kernels then run on CPU through the interpreter
(slow: keep kernel test shapes small). On a CUDA machine set ONBOARD_TEST_GPU=1 to run them natively.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

if os.environ.get("ONBOARD_TEST_GPU") != "1":
    os.environ.setdefault("TRITON_INTERPRET", "1")
# Tests never reach a real hub: the hub tests start a local server and point HF_ENDPOINT at it explicitly.
os.environ.setdefault("HF_HUB_DISABLE_UPDATE_CHECK", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
# Under pytest-xdist (`make test` runs one worker per core), each worker's torch and the processes it starts get an
# equal share of the cores: by default every worker's torch would start a thread per core, and on CI's 2 cores two
# busy workers with 2 OpenMP threads each spend their time waiting for one another. Set before torch is imported.
if os.environ.get("PYTEST_XDIST_WORKER") and "OMP_NUM_THREADS" not in os.environ:
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // max(workers, 1)))

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real third-party configs, tokenizers and templates (never committed): the fetch cache of
    scripts/fetch_test_data.py, else ../shared/data beside the clone (tests/ci.py real_data_dir). Without either the
    test skips, naming the fetch command; in CI too, which is not promised the data."""
    from tests.ci import need, real_data_dir

    need("real-data")
    found = real_data_dir()
    assert found is not None
    return found


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


@pytest.fixture(autouse=True)
def _forget_repository_modules() -> Iterator[None]:
    """Drop the repository code a test imported in this process (the sandbox stand-ins, the day-zero fixture test).

    The real sandbox worker's modules die with it. In the test process transformers keeps them in sys.modules and
    does not run a module again whose files hash the same, so a later test in the same process (another file, under
    pytest-xdist) would load the repository's code without executing it and its import canary would stay empty."""
    before = set(sys.modules)
    yield
    for name in [n for n in sys.modules if n not in before and n.split(".", 1)[0] == "transformers_modules"]:
        del sys.modules[name]


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: without xdist installed, pytest must not reject it
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """`--dist loadgroup` (what `make test` passes): one group per file and per engine, tests/xdist_groups.py."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from tests.xdist_groups import make_scheduler

    return make_scheduler(config, log)


def pytest_configure(config: pytest.Config) -> None:
    from tests.ci import hidden

    hidden()  # an unknown name in ONBOARD_TEST_HIDE is a usage error before anything runs


def pytest_runtest_setup(item: pytest.Item) -> None:
    """The pieces a test needs (tests/ci.py) are checked before its fixtures run: skipped with the command that
    provides a missing one, or failed under CI=true."""
    from tests.ci import need, needs_of

    for name in sorted(needs_of(item)):
        need(name)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist, the order groups are handed out in (tests/xdist_groups.py): the engine groups first, then
    files with a `slow` test, then the rest as collected, so the longest start early and the run ends on short files
    instead of one worker finishing a several-minute group alone. A serial run keeps the collected order.

    Refuses a run where an engine-marked test is in a file xdist_groups.ENGINE_FILES does not list: its server could
    start beside another of the same engine.

    ONBOARD_TEST_ONLY_NEEDING=piece (or "any") keeps only the tests that need that piece (tests/ci.py)."""
    from tests.ci import ONLY_NEEDING_ENV, needs_of
    from tests.xdist_groups import ENGINE_MARKERS, group_of

    only = os.environ.get(ONLY_NEEDING_ENV)
    if only:
        wanted = [bool(needs_of(item) & ({only} if only != "any" else needs_of(item))) for item in items]
        config.hook.pytest_deselected(items=[item for item, w in zip(items, wanted) if not w])
        items[:] = [item for item, w in zip(items, wanted) if w]

    rank: dict[str, int] = {}
    unlisted = set()
    for item in items:
        engine = next((m for m in ENGINE_MARKERS if item.get_closest_marker(m)), None)
        group = group_of(item.nodeid)
        if engine and group != f"engine-{engine}":
            unlisted.add(f"{item.nodeid.split('::', 1)[0]} ({engine})")
        rank[group] = min(rank.get(group, 2), 0 if engine else 1 if item.get_closest_marker("slow") else 2)
    if unlisted:
        raise pytest.UsageError(f"engine tests in files not in tests/xdist_groups.py ENGINE_FILES: "
                                f"{', '.join(sorted(unlisted))}; add each file there with its engine")  # fmt: skip
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=lambda item: rank[group_of(item.nodeid)])
