"""`onboard validate --endpoint A --endpoint B --endpoint C`: each endpoint validated against the goldens, each pair
against each other, through the real CLI. The endpoints are tests/validate/fake_openai.py servers backed by the
real tiny model in this process; the third serves the same model with its logprobs shifted from generated token 2 on,
as a cluster whose kernels go wrong past a decode step would.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from onboard.comparator import TopK
from onboard.validate_serving.runtime import load_candidate
from tests.validate.fake_openai import FakeServer
from tests.validate.test_cli_validate import onboard

SHIFT = 0.7  # nats added to each step's top logprob: far past float32 noise, tokens unchanged
FROM_STEP = 2


class Shifted:
    """The engine's own generations, each step from FROM_STEP on with its top logprob raised by SHIFT."""

    def __init__(self, engine) -> None:
        self.engine = engine

    def generate(self, prompts, max_new_tokens, top_k, *, ignore_eos=True):
        gens = self.engine.generate(prompts, max_new_tokens, top_k, ignore_eos=ignore_eos)
        return [
            replace(g, steps=tuple(_shift(s) if i >= FROM_STEP else s for i, s in enumerate(g.steps))) for g in gens
        ]


def _shift(row: TopK) -> TopK:
    return replace(row, logprobs=(row.logprobs[0] + SHIFT, *row.logprobs[1:]))


@pytest.fixture(scope="module")
def engine(tiny):
    return load_candidate(tiny.checkpoint("qwen3"), "float32")


def _validate(tiny, tmp_path: Path, *urls: str):
    args = [a for url in urls for a in ("--endpoint", url)]
    return onboard(
        "validate", str(tiny.checkpoint("qwen3")), "--golden", str(tiny.golden("qwen3").folder), *args,
        "--served-model", "tiny", "--no-performance", "--json", "--out", str(tmp_path / "run"), cwd=tmp_path,
    )  # fmt: skip


def test_sound_replicas_agree_and_each_is_recorded(tiny, engine, tmp_path: Path) -> None:
    with FakeServer(engine) as a, FakeServer(engine) as b:
        out = _validate(tiny, tmp_path, a.url, b.url)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    agree = next(c for c in result["checks"] if c["name"] == "endpoints_agree")
    assert agree["passed"] and agree["required"], agree
    pair = result["check_data"]["endpoints_agree"]["pairs"][0]
    assert pair["passed"] and pair["positions"] > 0 and pair["first"] is None
    assert [e["endpoint"] for e in result["endpoints"]] == [a.url, b.url]
    for n in (1, 2):
        own = json.loads((tmp_path / "run" / f"validation.endpoint-{n}.json").read_text())
        assert own["passed"] and own["candidate"]["kind"] == "endpoint"
    assert "pair matrix" in (tmp_path / "run" / "validation.md").read_text()


def test_the_diverging_endpoint_is_named_with_prompt_and_position(tiny, engine, tmp_path: Path) -> None:
    with FakeServer(engine) as a, FakeServer(engine) as b, FakeServer(Shifted(engine)) as c:
        out = _validate(tiny, tmp_path, a.url, b.url, c.url)
    assert out.returncode == 1, out.stderr
    result = json.loads(out.stdout)
    assert "endpoints_agree" in result["failed"]
    pairs = {(p["a"], p["b"]): p for p in result["check_data"]["endpoints_agree"]["pairs"]}
    assert pairs[a.url, b.url]["passed"]
    first_prompt = tiny.golden("qwen3").prompts[0].name
    for key in ((a.url, c.url), (b.url, c.url)):
        assert not pairs[key]["passed"], pairs[key]
        assert pairs[key]["first"]["prompt"] == first_prompt
        assert pairs[key]["first"]["generated_index"] == FROM_STEP, pairs[key]["first"]
    # The third endpoint fails its own validation too, and the fleet's check says which endpoint failed it.
    verdicts = {e["endpoint"]: e["passed"] for e in result["endpoints"]}
    assert verdicts == {a.url: True, b.url: True, c.url: False}
    parity = next(c_ for c_ in result["checks"] if c_["name"] in result["failed"] and c_["name"] != "endpoints_agree")
    assert parity["detail"].startswith(f"{c.url}: "), parity
    report = (tmp_path / "run" / "validation.md").read_text()
    print(report)
    assert f"{first_prompt}@{FROM_STEP}" in report


def test_mismatched_served_model_counts_are_a_usage_error(tiny, tmp_path: Path) -> None:
    out = onboard(
        "validate", str(tiny.checkpoint("qwen3")), "--endpoint", "http://127.0.0.1:9", "--endpoint",
        "http://127.0.0.1:10", "--served-model", "a", "--served-model", "b", "--served-model", "c", cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 2 and "3 --served-model for 2 --endpoint" in out.stderr
    assert "Hint:" in out.stderr and "Traceback" not in out.stderr


def test_a_check_another_endpoint_fails_fails_for_the_fleet_even_where_the_first_skipped_it() -> None:
    from onboard.validate_serving.endpoint_pairs import combine

    def result(checks: list[dict]) -> dict:
        return {"checks": checks, "passed": all(c["passed"] for c in checks if c["required"]), "failed": [],
                "candidate": {}}  # fmt: skip

    skip = {"name": "stop_set", "passed": False, "required": False, "skipped": True, "detail": "no logit_bias"}
    fail = {"name": "stop_set", "passed": False, "required": True, "detail": "stops on 1 of 2 end-of-turn tokens"}
    ok = {"name": "greedy_parity", "passed": True, "required": True, "detail": "identical"}
    fleet = combine([("A", result([skip, ok])), ("B", result([fail, ok]))])
    stop = fleet["checks"][0]
    assert (stop["passed"], stop["required"], stop["skipped"]) == (False, True, False)
    assert stop["detail"] == "A: no logit_bias | B: stops on 1 of 2 end-of-turn tokens"
    assert fleet["checks"][1] == ok and [e["endpoint"] for e in fleet["endpoints"]] == ["A", "B"]
