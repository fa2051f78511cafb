"""Stage `validate`: record goldens with the reference, then show a serving candidate equivalent to them.

golden.record (goldens) → candidates / endpoint (what is validated) → parity + checks (against a noise model,
comparator) → performance (measured separately) → report (validation.json + summary).
"""

from __future__ import annotations

__all__ = ["record", "validate"]


def __getattr__(name: str):  # lazy: importing the package must not import torch
    if name == "record":
        from onboard.validate_serving.golden import record

        return record
    if name == "validate":
        from onboard.validate_serving.run import validate

        return validate
    raise AttributeError(name)
