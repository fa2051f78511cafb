"""One tokenizer loader (onboard.verify_tokenizer.subject.load_tokenizer): the stages that only tokenize (goldens,
quantize-plan, draft checks) get the tokenizer verify-tokenizer checks, and no tokenizer where the folder declares
no vocabulary."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from onboard.verify_tokenizer.subject import load_tokenizer

TRAINED = Path(__file__).parent / "fixtures" / "trained-qwen3"
TOKENIZER_FILES = ("added_tokens.json", "merges.txt", "special_tokens_map.json", "tokenizer_config.json", "vocab.json")


def test_the_checkpoint_tokenizer_is_the_one_verify_tokenizer_builds(tmp_path) -> None:
    from transformers import AutoTokenizer

    for name in TOKENIZER_FILES:
        shutil.copy(TRAINED / name, tmp_path / name)
    text = "Hello world, 3 3 a ,b\nnew line"
    expected = AutoTokenizer.from_pretrained(str(tmp_path), trust_remote_code=False).encode(text)
    tokenizer = load_tokenizer(tmp_path)
    assert tokenizer is not None and tokenizer.encode(text) == expected and len(expected) > 5


def test_no_vocabulary_means_no_tokenizer(tmp_path) -> None:
    assert load_tokenizer(tmp_path) is None  # no tokenizer files at all
    # tokenizer_config.json alone (DeepSeek-R1's mirror): transformers would invent a tokenizer; there is none
    config = json.loads((TRAINED / "tokenizer_config.json").read_text())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    assert load_tokenizer(tmp_path) is None
