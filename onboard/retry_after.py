"""The one parser of an HTTP answer's `Retry-After` header (RFC 9110 §10.2.3), for hub requests and the watcher."""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping
from datetime import timezone


def retry_after_seconds(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds from `now` that `headers` ask a client to wait: delay-seconds, or an HTTP-date (0 once passed); None
    when absent or neither. Names match case-insensitively (a plain dict, httpx's or urllib's headers)."""
    if not headers:
        return None
    value = next((v for k, v in headers.items() if k.lower() == "retry-after"), None)
    if value is None:
        return None
    value = str(value).strip()
    if value.isascii() and value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # asctime's form carries no zone: an HTTP-date is always GMT
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))
