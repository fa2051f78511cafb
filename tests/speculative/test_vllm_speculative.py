"""`onboard validate --speculative`: greedy equivalence with speculative decoding on vLLM's CPU build (`ngram`): the
engine's tokens equal the goldens', its acceptance counters equal our replay of its proposer; a differing token fails.

The trained fixture (tests/fixtures/trained-qwen3) repeats itself ("the string of the string"), so n-gram lookup
drafts and is accepted often: speculation is really exercised, not just switched on. One server start (~20-60 s),
marked vllm: skipped without .venv-vllm (a failure under CI=true, as tests/validate/test_vllm). The other tests need
no engine.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from onboard.validate_serving.golden import record
from onboard.validate_serving.speculative import CHECK, expected_ngram, speculative_check
from tests.validate.test_cli_validate import onboard
from tests.validate.vllm_server import require_vllm

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "trained-qwen3"
K = 3


@pytest.mark.vllm
def test_validate_speculative_ngram_on_vllm_equals_the_goldens(tmp_path: Path) -> None:
    """`onboard validate FIXTURE --engine vllm --speculative ngram`: vLLM started with the speculative config, the
    whole validate run on it, and speculative_equivalence passed with the engine's counters equal to our replay."""
    require_vllm()
    golden = record(str(FIXTURE), tmp_path / "golden", max_new_tokens=24, calibrate=(), max_long_tokens=96)
    run = onboard("validate", str(FIXTURE), "--golden", str(golden.folder), "--engine", "vllm", "--speculative",
                  "ngram", "--speculative-k", str(K), "--no-performance", "--out", str(tmp_path / "v.json"), "--json",
                  cwd=tmp_path)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads((tmp_path / "v.json").read_text())
    check = next(c for c in result["checks"] if c["name"] == CHECK)
    print(check["detail"])
    data = result["check_data"][CHECK]
    engine, ours = data["engine"], data["ours"]
    assert check["passed"] and check["required"] and not data["differing"]
    assert data["prompts"] == len(golden.prompts) >= 8
    assert engine["drafts"] == ours["drafts"] > 0 and engine["draft_tokens"] == ours["draft_tokens"]
    assert engine["accepted"] >= ours["accepted"] > 0 and len(engine["per_position"]) == K


class _WrongAt5:
    """A candidate whose greedy continuation differs from the goldens' at token 5 (no engine needed)."""

    def generate(self, prompts: list[list[int]], n: int, top_k: int) -> list[SimpleNamespace]:
        ids = list(self.golden[tuple(prompts[0])])
        ids[5] += 1
        return [SimpleNamespace(ids=tuple(ids[:n]))]


def test_a_differing_token_and_missing_counters_fail_the_check(tmp_path: Path) -> None:
    first = SimpleNamespace(name="p0", prompt_ids=(1, 2, 3), generated_ids=(4, 5, 6, 7, 8, 9, 10))
    candidate = _WrongAt5()
    candidate.golden = {first.prompt_ids: first.generated_ids}
    check = speculative_check(SimpleNamespace(prompts=(first,)), candidate, "http://127.0.0.1:9", "ngram", K)
    assert not check.passed and check.data["differing"] == ["p0: token 5 is 10, golden 9"]
    assert "no spec_decode counters" in check.detail


def test_validate_speculative_refusals_exit_2(tmp_path: Path) -> None:
    golden = tmp_path / "nowhere"
    in_process = onboard("validate", str(FIXTURE), "--golden", str(golden), "--speculative", "ngram", cwd=tmp_path)
    bogus = onboard("validate", str(FIXTURE), "--golden", str(golden), "--engine", "vllm", "--speculative", "eagle9",
                    cwd=tmp_path)  # fmt: skip
    for run, says in ((in_process, "--speculative checks a serving engine"), (bogus, "not `ngram`, `mtp`")):
        assert run.returncode == 2 and says in run.stderr and "Hint:" in run.stderr and "Traceback" not in run.stderr


def test_ngram_replay_counts_by_hand() -> None:
    """Our replay of vLLM's proposer on a sequence worked by hand (prompt 1 2 3; the target's greedy continuation
    1 2 3 1 2 9 4; one token comes from prefill, so drafting starts after the first)."""
    replay = expected_ngram([1, 2, 3], [1, 2, 3, 1, 2, 9, 4], K)
    # context 1 2 3 1: `2 3 1`, `3 1` unseen; `1` first at 0 -> draft 2 3 1, all accepted, +1 own token (2)
    # context 1 2 3 1 2 3 1 2: `3 1 2` first at 2 -> draft 3 1 2, 0 accepted (9), +1 own token (9)
    # context ... 9: nothing to match -> no draft, own token (4): done
    assert replay == {"drafts": 2, "draft_tokens": 6, "accepted": 3, "per_position": [1, 1, 1]}


METRICS = """# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="t"} 16.0
vllm:spec_decode_num_drafts_created{engine="0",model_name="t"} 1.79e+09
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="t"} 48.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="t"} 17.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="t",position="1"} 5.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="t",position="0"} 9.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="t",position="2"} 3.0
vllm:iteration_tokens_total_count{engine="0",model_name="t"} 40.0
"""


def test_engine_counters_read_vllm_metrics() -> None:
    """The counters as vLLM 0.32 exports them (copied from a real ngram run): `_created` timestamps and other
    metrics ignored, positions in order; an endpoint without them is None."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from threading import Thread

    from onboard.validate_serving.speculative import engine_counters

    class Metrics(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server naming)
            body = (METRICS if self.path == "/metrics" else "").encode()
            self.send_response(200 if body else 404)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
    Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        counters = engine_counters(url)
        assert counters == {"drafts": 16.0, "draft_tokens": 48.0, "accepted": 17.0, "per_position": [9.0, 5.0, 3.0]}
    finally:
        server.shutdown()
    assert engine_counters("http://127.0.0.1:9") is None
