"""One rule for what a test needs but cannot find: a skip on a person's machine, a failure under CI=true.

CI installs everything the suite needs (.ci/run: vLLM's CPU build, llama.cpp, Chromium, the demo checkpoint through
`make test`), so a missing piece there is a broken CI set-up that a skip would hide. The one exception is ../shared/data
(third-party files beside the clone, never in the repository): tests/conftest.py skips without it, in CI too.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

IN_CI = os.environ.get("CI") == "true"


def missing(reason: str) -> NoReturn:
    """Skip (naming what is missing and how to get it), or fail under CI=true."""
    if IN_CI:
        pytest.fail(f"CI=true but {reason}: CI must provide it", pytrace=False)
    pytest.skip(reason)
