"""Click parameter types shared by the commands."""

from __future__ import annotations

import math
from typing import Any

import click


class FiniteFloatRange(click.FloatRange):
    """click.FloatRange that also refuses nan and inf: `nan` passes every range comparison (all are False), so
    `--budget-kl nan` or `--timeout nan` would otherwise run the whole command and fail, or hang, at the end."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


MAX_SECONDS = 7 * 86400.0
"""A week: a longer wait or timeout is a typo, and sleeps and socket timeouts overflow not far beyond (1e300 s)."""


def seconds(low: float) -> FiniteFloatRange:
    """A duration option: finite, at least `low`, at most MAX_SECONDS."""
    return FiniteFloatRange(min=low, max=MAX_SECONDS)
