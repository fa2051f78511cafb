"""The cyclic garbage collector paused around work that allocates many long-lived objects and no cycles
(imports, decoding checkpoint headers), so its passes do not walk them again and again as they pile up.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
