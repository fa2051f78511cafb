"""An engine served in a dtype the comparator has no bounds for is refused by validate before the run is spent,
with an input error naming the dtype and the ones it can judge (it used to be judged with float32's bounds)."""

from __future__ import annotations

import pytest

from onboard.errors import UnknownDtype
from onboard.validate_serving.endpoint import EndpointCandidate
from onboard.validate_serving.run import validate
from onboard.validate_serving.runtime import load_candidate
from tests.validate.fake_openai import FakeServer


def test_validate_refuses_an_endpoint_in_an_unknown_dtype_before_scoring(tiny) -> None:
    engine = load_candidate(tiny.checkpoint("qwen3"), "float32")
    with FakeServer(engine) as server:
        candidate = EndpointCandidate(server.url, "tiny", "fp8", timeout_s=10)
        probes = len(server.posts)  # capability detection, when the candidate was opened
        with pytest.raises(UnknownDtype, match=r"dtype 'fp8' has no column .*\(known: float64, float32") as raised:
            validate(tiny.golden("qwen3"), candidate, performance=False)
        assert len(server.posts) == probes  # no prompt was scored or generated before the refusal
    assert raised.value.exit_code == 2 and "float16, bfloat16" in raised.value.hint
    # the same engine labelled with a dtype the table knows is judged (and, being the goldens' model, passes)
    with FakeServer(engine) as server:
        assert validate(tiny.golden("qwen3"), EndpointCandidate(server.url, "tiny", "float32", timeout_s=10),
                        performance=False)["passed"] is True  # fmt: skip
