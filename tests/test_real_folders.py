"""Real folders as users have them (../shared/data; skipped with the reason when absent): a tokenizer-less mirror,
a raw GPT-2 BPE export and a download missing all its shards. Each says exactly what is wrong and claims nothing else.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from onboard.cli import main
from tests.real_data import llamacpp_vectors

DEEPSEEK = "deepseek/deepseek-r1_hf-mirror"  # config + tokenizer_config.json, no vocabulary file
GPT2_RAW = "gpt2/ort-extensions"  # vocab.json + merges.txt only
MIXTRAL = "mistral/mixtral-8x7b-v0.1_hf-mirror"  # index of 19 shards, none of them downloaded


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return int(info.value.code or 0), out, err


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("ONBOARD_DEBUG", raising=False)


def test_tokenizer_config_without_vocabulary(shared_data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _run(capsys, "verify-tokenizer", str(shared_data / DEEPSEEK), "--json")
    report = json.loads(out)
    assert rc == 2
    [fatal] = [f for f in report["findings"] if f["severity"] == "fatal"]
    assert fatal["code"] == "no-tokenizer-vocabulary"
    for name in ("tokenizer.json", "tokenizer.model", "vocab.json + merges.txt", "*.tiktoken"):
        assert name in fatal["message"], name
    # Nothing computed from the tokenizer transformers would invent (it said EOS id 2; DeepSeek-R1's is 1).
    assert not [f["code"] for f in report["findings"] if f["code"].startswith(("eos-", "bos-", "roundtrip-", "pad-"))]
    assert report["special_tokens"] == "unknown" and report["stop_set"] == "unknown"
    # The template checks need no vocabulary: they ran, with DeepSeek's own special-token strings.
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["chat_template_parity"]["passed"] and report["template"]["generation_prompt"] == "<｜Assistant｜>"
    assert "template-rejects-tools" in [f["code"] for f in report["findings"]]
    assert all(checks[n]["detail"].startswith("not run") for n in ("tokenizer_parity", "special_tokens", "round_trip"))


def test_raw_gpt2_export_reproduces_llamacpp(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = llamacpp_vectors(shared_data)["gpt-2"]["cases"]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"text": c["text"]}) + "\n" for c in cases), encoding="utf-8")
    rc, out, err = _run(capsys, "tokenize", str(shared_data / GPT2_RAW), "--jsonl", str(src))
    got = [json.loads(line)["ids"] for line in out.splitlines()]
    same = sum(g == c["ids"] for g, c in zip(got, cases))
    print(f"gpt-2 via tokenize on {GPT2_RAW}: {same}/{len(cases)}")
    assert rc == 0 and len(cases) == 46 and same == 46
    assert "warning: [tokenizer-class-assumed]" in err and "byte-level BPE, class GPT2Tokenizer assumed" in err


def test_missing_shards_one_grouped_finding(shared_data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _run(capsys, "inspect", str(shared_data / MIXTRAL), "--json", "--target", "l4")
    profile = json.loads(out)
    assert rc == 2
    [missing] = [f for f in profile["findings"] if f["code"] == "missing-shard"]
    assert missing["severity"] == "fatal" and len(missing["members"]) == 19
    assert missing["message"] == (
        "19 shards missing: model-00001-of-00019.safetensors … model-00019-of-00019.safetensors"
    )
    assert profile["findings"][0] == missing  # fatal findings lead
    for field in ("layers", "features", "mlp_gated", "parameters", "memory"):
        assert profile[field] == "unknown", field
    rc, _, err = _run(capsys, "inspect", str(shared_data / MIXTRAL), "--target", "l4")
    assert rc == 2 and "UNUSABLE [missing-shard] 19 shards missing" in err
    for claim in ("layers:", "features:", "plain_mlp", "memory:", "fits", "target 1×", "parameters:"):
        assert claim not in err, claim
