"""Endpoint faults give clear errors (never a traceback), and missing engine features are reported as not checked."""

from __future__ import annotations

import socket

import pytest

from onboard.validate_serving.endpoint import EndpointCandidate, EndpointError
from onboard.validate_serving.run import validate
from onboard.validate_serving.runtime import load_candidate
from tests.validate.fake_openai import FakeServer


@pytest.fixture(scope="module")
def engine(tiny):
    return load_candidate(tiny.checkpoint("qwen3"), "float32")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_server_down_is_a_clear_error() -> None:
    with pytest.raises(EndpointError, match="cannot connect") as info:
        EndpointCandidate(f"http://127.0.0.1:{_free_port()}", "tiny", "float32", timeout_s=2)
    assert "--endpoint" in info.value.hint and info.value.exit_code == 2


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("slow", "no answer within 0.5 s"),
        ("truncated", "truncated response"),
        ("no_choices", "response has no choices"),
        ("http500", "HTTP 500"),
    ],
)
def test_faulty_completions_are_clear_errors(engine, mode: str, message: str) -> None:
    with FakeServer(engine, mode) as server, pytest.raises(EndpointError, match=message) as info:
        EndpointCandidate(server.url, "tiny", "float32", timeout_s=0.5)
    assert info.value.hint


def test_malformed_json_is_a_clear_error(engine) -> None:
    with FakeServer(engine, "malformed") as server, pytest.raises(EndpointError, match="malformed JSON"):
        EndpointCandidate(server.url, "tiny", "float32", timeout_s=2)


def test_wrong_shape_names_the_field(engine) -> None:
    # msgspec decodes the reply: the error names the JSON path, not a KeyError deep in the parser
    with FakeServer(engine, "bad_shape") as server, pytest.raises(EndpointError, match=r"at `\$\.choices`") as info:
        EndpointCandidate(server.url, "tiny", "float32", timeout_s=5)
    assert "/v1/completions" in info.value.message


def test_rate_limit_is_retried_after_the_servers_delay(engine) -> None:
    # 429 + Retry-After: 1 is retried after 1 s (the openai client's own first backoff is at most 0.5 s)
    with FakeServer(engine, "rate_limited") as server:
        candidate = EndpointCandidate(server.url, "tiny", "float32", timeout_s=5)
    assert candidate.capabilities.ignore_eos
    assert len(server.posts) >= 2 and server.posts[1] - server.posts[0] >= 1.0


def test_unknown_served_model_lists_what_is_served(engine) -> None:
    with FakeServer(engine) as server, pytest.raises(EndpointError, match="serving: tiny"):
        EndpointCandidate(server.url, "other", "float32", timeout_s=5)


def test_truncated_stream_is_a_clear_error(engine) -> None:
    with FakeServer(engine, "stream_cut") as server:
        candidate = EndpointCandidate(server.url, "tiny", "float32", timeout_s=5)
        with pytest.raises(EndpointError, match="without \\[DONE\\]"):
            candidate.generate([[1, 2, 3]], 4, 1)


def test_stalled_stream_is_a_clear_error(engine) -> None:
    with FakeServer(engine, "stream_stall") as server:
        candidate = EndpointCandidate(server.url, "tiny", "float32", timeout_s=1)
        with pytest.raises(EndpointError, match="the stream stalled for more than 1 s") as info:
            candidate.generate([[1, 2, 3]], 4, 1)
    assert "--timeout" in info.value.hint


def test_engine_without_prompt_logprobs_reports_what_was_not_checked(tiny, engine) -> None:
    with FakeServer(engine) as server:
        candidate = EndpointCandidate(server.url, "tiny", "float32", timeout_s=10)
        caps = candidate.capabilities
        assert not caps.prompt_logprobs and not caps.force_token and caps.ignore_eos
        result = validate(tiny.golden("qwen3"), candidate, performance=True)
    checks = {c["name"]: c for c in result["checks"]}
    for name in ("prompt_position_parity", "stop_set"):
        assert checks[name]["skipped"] and not checks[name]["passed"], name
        assert checks[name]["detail"].startswith("not checked")
    # Padding is judged on generated positions: the prompt alone, in one request and in concurrent requests.
    assert checks["determinism_padding"]["passed"] and not checks["determinism_padding"]["skipped"]
    # What could be checked (generated positions, greedy tokens, determinism) passes on this clean engine.
    assert checks["logit_parity"]["passed"] and checks["greedy_parity"]["passed"]
    assert result["passed"]
    assert result["performance"]["peak_memory_bytes"] is None
    assert result["performance"]["prefill_by_length"][0]["ms"] > 0


def test_a_scored_position_without_top_k_is_a_clear_error() -> None:
    """vLLM-style prompt_logprobs with one position left empty: named as a malformed answer (position and count),
    not an IndexError in the comparator."""
    from onboard.validate_serving.endpoint import _prompt_rows, _require_top_k

    seq = [5, 6, 7, 8]
    entry = {"6": {"logprob": -0.1, "rank": 1}, "9": {"logprob": -2.5, "rank": 2}}
    choice = {"prompt_logprobs": [None, entry, {}, {"8": {"logprob": -0.2, "rank": 1}}]}
    rows = _prompt_rows(choice, seq, 2, "http://engine")
    assert [row.ids for row in rows] == [(6, 9), (), (8,)]
    with pytest.raises(EndpointError, match=r"no top-2 logprobs at 1 of 3 scored positions \(first: position 2\)"):
        _require_top_k(rows, 2, "http://engine/v1/completions (sequence 0)")
    _require_top_k(rows, 0, "top-k not asked for: nothing to require")
    _require_top_k([rows[0], rows[2]], 2, "every position answered")
