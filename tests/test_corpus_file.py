"""verify-tokenizer --corpus FILE.jsonl: each line decoded by msgspec; a bad line is named with its field."""

from __future__ import annotations

from pathlib import Path

import pytest

from onboard.errors import InputError
from onboard.verify_tokenizer.corpus import read_corpus


def test_jsonl_lines_and_plain_text(tmp_path: Path) -> None:
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_text('{"text": "a b", "source": "x"}\n\n{"text": "日本"}\n', encoding="utf-8")
    assert read_corpus(jsonl) == ("a b", "日本")
    plain = tmp_path / "c.txt"
    plain.write_text("one\ntwo\n")
    assert read_corpus(plain) == ("one", "two")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"txt": "a"}', "line 2: Object missing required field `text`"),
        ('{"text": 3}', "line 2: Expected `str`, got `int` - at `$.text`"),
        ("{nope", "line 2: not JSON"),
    ],
)
def test_a_bad_line_is_named(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text('{"text": "ok"}\n' + line + "\n")
    with pytest.raises(InputError) as info:
        read_corpus(path)
    assert message in info.value.message and str(path) in info.value.message and '{"text"' in info.value.hint
