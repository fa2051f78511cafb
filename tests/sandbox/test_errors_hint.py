"""The sandbox's failure hint blames whoever's frame raised: onboard, a library, or the repository's code."""

from __future__ import annotations

from pathlib import Path

import onboard
from onboard.sandbox.run import _who_raised

ONBOARD = Path(onboard.__file__).parent


def _tb(path: str) -> str:
    return f'Traceback (most recent call last):\n  File "/x/worker.py", line 1, in run\n  File "{path}", line 9, in f\nE: boom'


def test_hint_names_the_party_whose_frame_raised() -> None:
    assert "bug in onboard" in _who_raised(_tb(str(ONBOARD / "verify_tokenizer" / "__init__.py")))
    assert "library" in _who_raised(_tb("/v/lib/python3.11/site-packages/transformers/modeling_utils.py"))
    assert "repository's code" in _who_raised(_tb("/ckpt/modeling_dayzero.py"))
    assert "repository's code" in _who_raised("no frames at all")
