"""The cyclic garbage collector paused around work that allocates many objects and makes no garbage cycles.

Importing modules and decoding checkpoint headers create hundreds of thousands of objects that stay alive; the
collector's passes would walk them again and again as they pile up (start-up imports: ~5 ms of a 0.2 s `onboard
inspect`; reading a 93k-tensor checkpoint: about a fifth of inspect's time). Reference counting still frees
everything as usual; the collector is restored as it was found.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    """The collector off for the block, then as it was."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
