"""llama.cpp engine tests: the `llamacpp` marker, and the rule for a missing engine.

Skipped with a reason naming scripts/install_llama_cpp.sh when .venv-llamacpp is absent; under CI=true a missing
engine fails instead (CI installs it: .ci/run).
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "llamacpp: converts with llama.cpp's converter and serves a GGUF on loopback (needs .venv-llamacpp)"
    )


def require_llamacpp() -> None:
    from onboard.engines import llamacpp

    if llamacpp.available():
        return
    reason = (f"llama.cpp not installed ({llamacpp.engine_python()} or its converter missing): run "
              "scripts/install_llama_cpp.sh")  # fmt: skip
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {reason}; the engine tests must run in CI", pytrace=False)
    pytest.skip(reason)


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
