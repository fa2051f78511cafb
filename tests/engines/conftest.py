"""llama.cpp engine tests: the `llamacpp` marker, and the rule for a missing engine.

A missing engine goes through tests/ci.py's rule: skipped naming scripts/install_llama_cpp.sh, failed under CI=true.
"""

from __future__ import annotations

import os

import pytest

from tests.ci import need

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "llamacpp: converts with llama.cpp's converter and serves a GGUF on loopback (needs .venv-llamacpp)"
    )


def require_llamacpp() -> None:
    need("llamacpp")


@pytest.fixture(scope="module")
def _llamacpp_installed() -> None:
    """Used by the `llamacpp` modules (pytestmark usefixtures): the launch tests need no engine."""
    require_llamacpp()


@pytest.fixture(scope="module")
def _one_torch_thread() -> object:
    """Tiny models: one intra-op thread is faster than two contending on a 2-core box; restored afterwards."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
