"""The sandbox under test is bubblewrap: on a person's machine without it the tests skip, naming the package to
install; under CI=true (.ci/install-system.sh installs it) a bubblewrap that does not work is a failure."""

from __future__ import annotations

import pytest

from onboard.errors import SandboxUnavailable
from onboard.sandbox import isolation
from tests.ci import PIECES, missing


@pytest.fixture
def bubblewrap() -> str:
    """bubblewrap, the one isolation method, once it is shown to work here. A test asking for it needs the
    `bubblewrap` piece (tests/ci.py FIXTURE_PIECES), checked before this runs."""
    try:
        return isolation.choose_method(method=isolation.BUBBLEWRAP)
    except SandboxUnavailable as exc:
        missing(f"bubblewrap cannot isolate the worker here ({exc.message}): {PIECES['bubblewrap'].command}")
