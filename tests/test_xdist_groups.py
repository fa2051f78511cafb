"""The test scheduler's groups (tests/xdist_groups.py): every listed engine file exists and holds that engine's
marker, and node ids map to their file's group or their engine's."""

from __future__ import annotations

from pathlib import Path

from tests.xdist_groups import ENGINE_FILES, group_of

REPO = Path(__file__).resolve().parents[1]


def test_every_engine_file_exists_and_is_marked_for_its_engine() -> None:
    for file, engine in ENGINE_FILES.items():
        path = REPO / file
        assert path.is_file(), f"{file} is listed in tests/xdist_groups.py ENGINE_FILES but does not exist"
        assert f"pytest.mark.{engine}" in path.read_text(), f"{file} has no pytest.mark.{engine}"


def test_groups_are_the_file_or_the_engine() -> None:
    assert group_of("tests/test_fsutil.py::test_x[a@b]") == "tests/test_fsutil.py"
    assert group_of("tests/validate/test_vllm.py::test_vllm_matches_goldens[llama]") == "engine-vllm"
    assert group_of("tests/speculative/test_vllm_speculative.py::test_y") == "engine-vllm"
    assert group_of("tests/engines/test_convert_inputs.py::test_z") == "engine-llamacpp"


def test_a_files_tests_run_on_one_worker() -> None:
    """End to end through pytest-xdist, as `make test` runs it: each file's tests on one worker. Under xdist 3.8 +
    pytest 9.2's own loadgroup (pytest-xdist #1386) test_fsutil.py's tests went to both workers."""
    import os
    import re
    import subprocess
    import sys

    files = ["tests/test_fsutil.py", "tests/test_xdist_groups.py"]
    # A fresh session, not one that thinks it is this run's worker (make test runs this test under xdist).
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")} | {"PYTEST_ADDOPTS": ""}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider",
         "-k", "not test_a_files_tests_run_on_one_worker", *files],
        cwd=REPO, capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    workers: dict[str, set[str]] = {}
    for worker, nodeid in re.findall(r"\[(gw\d+)\][^\n]*? PASSED (tests/\S+)", run.stdout):
        workers.setdefault(nodeid.split("::", 1)[0], set()).add(worker)
    assert set(workers) == set(files), run.stdout[-2000:]
    assert all(len(w) == 1 for w in workers.values()), workers
