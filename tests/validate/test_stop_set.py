"""One stop-set definition: verify-tokenizer reports it, goldens record it, validate forces each of its tokens on the
candidate, which stops only on what an engine loads from the files (the Llama 3 <|eot_id|> bug, BUGZOO B01)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from onboard.validate_serving.golden import record
from onboard.validate_serving.run import validate
from onboard.validate_serving.runtime import load_candidate
from onboard.verify_tokenizer import verify_tokenizer
from tests.validate.tiny_models import build

IM_END, ENDOFTEXT = 151645, 151643  # Qwen3: the chat template ends assistant turns with <|im_end|>


@pytest.fixture(scope="module")
def chat_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build("qwen3", tmp_path_factory.mktemp("stops") / "qwen3-chat", tokenizer=True)


def _base_tokenizer_eos(src: Path, dst: Path) -> Path:
    """Like a base model's files under a chat template: EOS <|endoftext|> everywhere, <|im_end|> declared nowhere."""
    import shutil

    shutil.copytree(src, dst)
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        doc = json.loads((dst / name).read_text())
        doc["eos_token"] = "<|endoftext|>"
        (dst / name).write_text(json.dumps(doc))
    for name in ("generation_config.json", "config.json"):
        doc = json.loads((dst / name).read_text())
        doc["eos_token_id"] = [ENDOFTEXT] if name == "generation_config.json" else ENDOFTEXT
        (dst / name).write_text(json.dumps(doc))
    return dst


def _stop_check(golden, path: Path) -> dict:
    result = validate(golden, load_candidate(path, "float32"), performance=False, only=frozenset({"behaviour"}))
    return next(c for c in result["checks"] if c["name"] == "stop_set")


def test_a_candidate_loading_complete_files_stops_on_the_whole_stop_set(chat_checkpoint, tmp_path):
    golden = record(str(chat_checkpoint), tmp_path / "g", max_new_tokens=2, calibrate=(), max_long_tokens=16)
    assert golden.manifest["stop_token_ids"] == [ENDOFTEXT, IM_END]
    check = _stop_check(golden, chat_checkpoint)
    assert check["passed"] and not check["skipped"], check
    assert check["detail"] == f"stops on every token of the declared stop set {[ENDOFTEXT, IM_END]}"


def test_an_undeclared_end_of_turn_token_fails_stop_set(chat_checkpoint, tmp_path):
    broken = _base_tokenizer_eos(chat_checkpoint, tmp_path / "qwen3-base-eos")
    golden = record(str(broken), tmp_path / "g", max_new_tokens=2, calibrate=(), max_long_tokens=16)
    # The end-of-turn token the template writes is in the declared stop set although no file lists it as EOS...
    assert golden.manifest["stop_token_ids"] == [ENDOFTEXT, IM_END]
    report = verify_tokenizer(str(broken), golden_dir=tmp_path / "tok", record=True)  # the same definition
    assert report.special_tokens.stop_ids == golden.manifest["stop_token_ids"]
    assert "end-of-turn-not-stop" in {f.code for f in report.findings}
    # ...and a candidate that stops where an engine would (the files' EOS) runs past it: the check names the fix.
    check = _stop_check(golden, broken)
    assert not check["passed"] and check["required"] and not check["skipped"]
    assert f"{IM_END}: generation continued" in check["detail"]
    assert f"add [{IM_END}] to generation_config.json eos_token_id" in check["detail"]
