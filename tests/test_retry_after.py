"""onboard.retry_after: the one Retry-After parser (hub requests and the watch service)."""

from __future__ import annotations

import httpx2
import pytest

from onboard.retry_after import retry_after_seconds

NOW = 1445412470.0  # 10 s before Wed, 21 Oct 2015 07:28:00 GMT


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("30", 30.0),
        (" 0 ", 0.0),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 10.0),  # IMF-fixdate
        ("Wednesday, 21-Oct-15 07:28:00 GMT", 10.0),  # RFC 850, obsolete but to be accepted
        ("Wed Oct 21 07:28:00 2015", 10.0),  # asctime: no zone, GMT by definition
        ("Wed, 21 Oct 2015 07:27:00 GMT", 0.0),  # a date already past: no wait, never a negative one
    ],
)
def test_seconds_and_http_dates(value: str, seconds: float) -> None:
    assert retry_after_seconds({"Retry-After": value}, now=NOW) == seconds


@pytest.mark.parametrize("value", ["-5", "1.5", "soon", "", "²", "Wed, 32 Oct 2015 07:28:00 GMT", "3 s"])
def test_negative_fractional_and_garbage_values_are_none(value: str) -> None:
    assert retry_after_seconds({"Retry-After": value}, now=NOW) is None


def test_absent_header_and_no_headers_are_none() -> None:
    assert retry_after_seconds(None) is None
    assert retry_after_seconds({}) is None
    assert retry_after_seconds({"Content-Type": "text/plain"}) is None


def test_names_match_in_any_case_and_httpx_headers_work() -> None:
    assert retry_after_seconds({"retry-after": "7"}) == 7.0
    assert retry_after_seconds({"RETRY-AFTER": "7"}) == 7.0
    assert retry_after_seconds(httpx2.Headers({"Retry-After": "7"})) == 7.0
