"""The isolation methods under test, each skipped with its reason only where it cannot be set up.

CI installs bubblewrap (.ci/install-system.sh), so under CI=true a bubblewrap that does not work is a failure, not a
skip. `unshare` is the fallback for machines without bubblewrap; where user namespaces are restricted for plain
`unshare` (Ubuntu 24.04's AppArmor default) it is skipped, saying so.
"""

from __future__ import annotations

import pytest

from onboard.errors import SandboxUnavailable
from onboard.sandbox import isolation
from tests.ci import IN_CI, missing


def require(method: str) -> str:
    try:
        isolation.choose_method(method=method)
    except SandboxUnavailable as exc:
        if IN_CI and method == isolation.BUBBLEWRAP:
            pytest.fail(f"CI installs bubblewrap, but it does not work here: {exc.message}")
        pytest.skip(f"{method} isolation cannot be set up here ({exc.message}); a machine where it works "
                    f"(bubblewrap installed, user namespaces allowed) checks this")  # fmt: skip
    return method


@pytest.fixture(params=[isolation.BUBBLEWRAP, isolation.UNSHARE])
def method(request: pytest.FixtureRequest) -> str:
    """Each isolation method in turn."""
    return require(request.param)


@pytest.fixture
def default_method() -> str:
    """The method run_isolated picks by itself (bubblewrap first)."""
    try:
        return isolation.choose_method()
    except SandboxUnavailable as exc:
        missing(f"no isolation method works here ({exc.message}); install bubblewrap to check this")
