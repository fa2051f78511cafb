"""How `make test` spreads the suite over pytest-xdist workers: one group per test file, one per serving engine.

A group runs on one worker, in collection order: a file's module- and session-scoped fixtures (a swept model, a
started server) are built once, as in a serial run, and two servers of one engine never start at once (vLLM's CPU
build takes both cores and gigabytes to start).

Why a scheduler of our own (tests/conftest.py installs it for `--dist loadgroup`): xdist's loadgroup passes each
test's xdist_group by appending it to the test's node id in the worker, and pytest 9.2 builds node ids another way,
so the suffix is lost and every test is scheduled on its own, silently (pytest-xdist issue #1386, unfixed in 3.8.0).
Under that, c685875's CI ran two tests of one file on two workers and tests of different files in one process in
an order no serial run had, and failed. Here the group comes from the node id's file part, which every pytest
version keeps.
"""

from __future__ import annotations

from typing import Any

ENGINE_MARKERS = ("vllm", "llamacpp")
# Files holding engine-marked tests (ENGINE_MARKERS): each engine's files form one group.
# tests/conftest.py refuses a run where an engine-marked test lives in a file not listed here.
ENGINE_FILES = {
    "tests/validate/test_vllm.py": "vllm",
    "tests/speculative/test_vllm_speculative.py": "vllm",
    "tests/tool_calls/test_vllm_agreement.py": "vllm",
    "tests/tool_calls/test_vllm_tool_check.py": "vllm",
    "tests/engines/test_llamacpp_architectures.py": "llamacpp",
    "tests/engines/test_llamacpp_trained.py": "llamacpp",
    "tests/engines/test_convert_inputs.py": "llamacpp",
}


def group_of(nodeid: str) -> str:
    """`engine-<engine>` for an engine file's tests, else the test's file."""
    file = nodeid.split("::", 1)[0]
    engine = ENGINE_FILES.get(file)
    return f"engine-{engine}" if engine else file


def make_scheduler(config: Any, log: Any) -> Any:
    """xdist's load-scope scheduling over `group_of`, handing the groups out in the order the workers collected
    them (tests/conftest.py sorts the longest first), not by their number of tests."""
    from xdist.scheduler import LoadScopeScheduling

    class FileAndEngineScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    config.option.loadscopereorder = False
    return FileAndEngineScheduling(config, log)
