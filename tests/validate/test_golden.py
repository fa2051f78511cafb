"""Goldens: the recorded format, the prompt suite (chat template, boundaries), and clear errors on bad folders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from onboard.errors import InputError
from onboard.validate_serving.golden import FORMAT, LOGPROB_DECIMALS, read_golden
from tests.validate.conftest import NEW_TOKENS
from tests.validate.tiny_models import ORIGINAL_MAX, QWEN3_TOKENIZER, WINDOW


def test_recorded_golden_is_complete_and_documented(tiny) -> None:
    golden = tiny.golden("gemma2")
    folder = golden.folder
    assert sorted(p.name for p in folder.iterdir()) == ["MANIFEST.json", "prompts.jsonl", "tool_calls.json"]  # no temp
    manifest = json.loads((folder / "MANIFEST.json").read_text())
    assert manifest["format"] == FORMAT
    import transformers

    assert manifest["reference"] == {
        "library": "transformers",
        "version": transformers.__version__,
        "identity": f"transformers {transformers.__version__}",  # which reference produced the goldens
        "attn_implementation": "eager",
        "dtype": "float32",
        "device": "cpu",
    }
    assert {"torch", "transformers", "python"} <= set(manifest["versions"])
    assert manifest["hardware"]["cpu_count"] >= 1
    assert manifest["boundaries"] == {"sliding_window": WINDOW}
    assert manifest["noise"]["float32"]["baseline"] == "float64" and not manifest["noise"]["float32"]["nonfinite"]
    assert manifest["activation_max_abs"] and manifest["stop_token_ids"] == [2]
    lines = (folder / "prompts.jsonl").read_text().splitlines()
    assert len(lines) == len(manifest["prompts"]) == len(golden.prompts)
    for line in lines:
        doc = json.loads(line)
        n = len(doc["prompt_ids"]) + len(doc["generated_ids"])
        assert len(doc["generated_ids"]) == NEW_TOKENS
        assert len(doc["top_ids"]) == len(doc["top_logprobs"]) == len(doc["token_logprobs"]) == n - 1
        assert all(len(str(v).split(".")[-1]) <= LOGPROB_DECIMALS for row in doc["top_logprobs"] for v in row)
    long = next(p for p in golden.prompts if p.kind == "long")
    assert len(long.prompt_ids) > WINDOW and long.boundaries == {"sliding_window": WINDOW}
    # The golden's greedy tokens are the argmax of its own teacher-forced distributions.
    for p in golden.prompts:
        start = len(p.prompt_ids) - 1
        assert [p.rows[start + t].ids[0] for t in range(NEW_TOKENS)] == list(p.generated_ids)


def test_long_prompt_crosses_the_original_rope_context(tiny) -> None:
    golden = tiny.golden("llama")
    long = next(p for p in golden.prompts if p.kind == "long")
    assert golden.manifest["boundaries"] == {"original_max_position_embeddings": ORIGINAL_MAX}
    assert len(long.prompt_ids) > ORIGINAL_MAX


def test_prompt_suite_uses_the_chat_template_without_double_bos() -> None:
    from transformers import AutoTokenizer

    from onboard.validate_serving.prompts import build_suite

    tokenizer = AutoTokenizer.from_pretrained(QWEN3_TOKENIZER)
    suite = build_suite(tokenizer, None, vocab_size=151936, max_new_tokens=8)
    kinds = {p.kind for p in suite}
    assert kinds == {"short", "multilingual", "code", "chat", "long"}
    chat = next(p for p in suite if p.name == "chat_system")
    im_start = tokenizer.convert_tokens_to_ids("<|im_start|>")
    assert chat.ids[0] == im_start and chat.ids.count(im_start) == 3  # system, user, assistant header
    assert chat.text.endswith("<|im_start|>assistant\n")
    assert any("东京" in (p.text or "") for p in suite)


def test_read_golden_errors_name_the_file_and_line(tiny, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a golden folder") as info:
        read_golden(tmp_path)
    assert "golden record" in info.value.hint
    src = tiny.golden("qwen3").folder
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "MANIFEST.json").write_text((src / "MANIFEST.json").read_text())
    lines = (src / "prompts.jsonl").read_text().splitlines()
    (bad / "prompts.jsonl").write_text(lines[0] + "\n" + lines[1][:50] + "\n")
    with pytest.raises(InputError, match=r"prompts.jsonl:2: malformed golden line"):
        read_golden(bad)
    (bad / "MANIFEST.json").write_text(json.dumps({"format": "other/9"}))
    with pytest.raises(InputError, match="format 'other/9'"):
        read_golden(bad)
    # A value of the wrong type is named by its JSON path, not found later as a TypeError deep in validate.
    doc = json.loads(lines[0])
    doc["prompt_ids"][1] = "7"
    (bad / "MANIFEST.json").write_text((src / "MANIFEST.json").read_text())
    (bad / "prompts.jsonl").write_text(json.dumps(doc) + "\n")
    with pytest.raises(InputError, match=r"prompts.jsonl:1: .*got `str` - at `\$\.prompt_ids\[1\]`"):
        read_golden(bad)
    manifest = json.loads((src / "MANIFEST.json").read_text())
    manifest["generation"]["top_k"] = "ten"
    (bad / "MANIFEST.json").write_text(json.dumps(manifest))
    with pytest.raises(InputError, match=r"MANIFEST.json: .*at `\$\.generation\.top_k`"):
        read_golden(bad)


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        (("top_ids", 2), [], r"Expected `array` of length >= 1 - at `\$\.top_ids\[2\]`"),  # was an IndexError
        (("top_logprobs", 2, 0), 1e30, r"Expected `float` <= 0.0 - at `\$\.top_logprobs\[2\]\[0\]`"),  # OverflowError
        (("token_logprobs", 1), 0.5, r"<= 0.0 - at `\$\.token_logprobs\[1\]`"),
        (("prompt_ids", 0), -1, r"Expected `int` >= 0 - at `\$\.prompt_ids\[0\]`"),
        (("top_logprobs", 2), [-0.5], r"top_ids\[2\] and top_logprobs\[2\] differ in length"),
    ],
)
def test_read_golden_refuses_values_no_reference_writes(tiny, tmp_path: Path, field: tuple, value, says: str) -> None:
    """Values that broke `onboard golden diff` / validate deep in the comparator are refused where the line is read,
    naming the file, the line and the JSON path."""
    src = tiny.golden("qwen3").folder
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "MANIFEST.json").write_text((src / "MANIFEST.json").read_text())
    lines = (src / "prompts.jsonl").read_text().splitlines()
    doc = json.loads(lines[1])
    target = doc
    for key in field[:-1]:
        target = target[key]
    target[field[-1]] = value
    (bad / "prompts.jsonl").write_text("\n".join([lines[0], json.dumps(doc), *lines[2:]]) + "\n")
    with pytest.raises(InputError, match=r"prompts.jsonl:2: malformed golden line.*" + says) as info:
        read_golden(bad)
    assert info.value.hint == "re-record the goldens"


def test_recording_keeps_other_stages_files(tiny, tmp_path: Path) -> None:
    """golden_outputs/<slug>/ is shared (verify-tokenizer writes tokenizer.json there): recording must not drop it."""
    from onboard.validate_serving.golden import record

    out = tmp_path / "shared"
    out.mkdir()
    (out / "tokenizer.json").write_text("{}")
    record(str(tiny.checkpoint("qwen3")), out, max_new_tokens=2, calibrate=(), max_long_tokens=16)
    assert sorted(p.name for p in out.iterdir()) == [
        "MANIFEST.json",
        "prompts.jsonl",
        "tokenizer.json",
        "tool_calls.json",
    ]
    assert read_golden(out).manifest["noise"] == {}
