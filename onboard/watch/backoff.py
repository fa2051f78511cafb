"""Retry delays: exponential with jitter, never shorter than what the server asked for (Retry-After, parsed by
onboard.retry_after)."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    """delay(n) = min(cap, base * factor**(n-1)) * (1 ± jitter), raised to `retry_after` when the server set one."""

    base_s: float = 5.0
    factor: float = 2.0
    cap_s: float = 600.0
    jitter: float = 0.1
    """Spread retries of many jobs/watchers so they do not hit the hub in lockstep."""

    def delay(self, failures: int, retry_after: float | None = None) -> float:
        """Seconds to wait after the `failures`-th consecutive failure (1-based)."""
        raw = min(self.cap_s, self.base_s * self.factor ** max(0, failures - 1))
        raw *= 1.0 + random.uniform(-self.jitter, self.jitter)
        # The server's Retry-After is a floor, and it may exceed our cap: a rate limit is not ours to shorten.
        return max(raw, retry_after or 0.0)
