"""The built-in stress corpus, plus user corpora (`--corpus FILE`: JSONL `{"text": …}` lines or plain text lines).

Each string targets a known day-zero failure: whitespace runs (SentencePiece prefix space, llama.cpp regexes),
digit grouping (Llama 3 vs Qwen), emoji ZWJ sequences and CJK/Khmer (byte fallback, multi-byte merges),
contractions (case-insensitive `'RE`), code, and special-token strings in the middle of text (`legacy` spacing).
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from onboard import serde
from onboard.errors import InputError
from onboard.verify_tokenizer.fingerprint import known_fingerprints

STRESS: tuple[str, ...] = (
    "", " ", "  ", "   ", "\t", "\n", "\n\n", "\n\n\n", "\t\n", " \n ", "\r\n", "  \t  \n\n   x",
    "Hello world", " Hello world", "Hello World", " Hello World!", "  leading two spaces", "trailing   ",
    "HELLO WORLD", "hello   world\tand\ttabs", "line one\nline two\n\n  indented",
    "3", "33", "333", "3333", "33333", "333333", "3333333", "12345678901234567890", "3.14159", "1,000,000",
    "What is 3333+777?", "0x7fffffff 1e-9 -42", "٣٤٥ ١٢",
    "🚀", "🦙🦙", "😶\u200d🌫️", "👨\u200d👩\u200d👧\u200d👦 family", "🏳️\u200d🌈", "✅ done", "e\u0301 vs é",
    "我想在apple工作1314151天～", "日本語のテキストです。", "한국어 문장입니다.", "ÄÖÜäöüß café naïve résumé",
    "កាន់តែពិសេសអាច", "нещо на Български", "Съешь же ещё этих мягких французских булок", "مرحبا بالعالم", "שלום עולם",
    "I've been 'told he's there, 'RE you sure? 'M not sure I'll make it, 'D you like some tea? We'Ve a'lL",
    "don't can't won't shouldn't y'all",
    "def f(x):\n    return x ** 2  # square\n", "for (int i = 0; i < n; ++i) { a[i] = b[i]; }",
    '{"key": [1, 2, 3], "nested": {"a": null}}', "<div class=\"x\">&nbsp;</div>", "SELECT * FROM t WHERE id=1;",
    "    four space indent", "\tTab indent", "``` python\nprint('hi')\n```", "------======= ...... !!!!!! ??????",
    "''''''```````\"\"\"\"", "a ,b", "3 3", "hello\nworld",
    "[INST] look-alike [/INST]", "<s> not really", "< |im_end| >", "<|not_a_token|>", "<unk>x", "</s >",
    known_fingerprints()[0],  # llama.cpp's chktxt: its token ids are the pre-tokenizer fingerprint
    "The quick brown fox jumps over the lazy dog. " * 40,
    "a" * 3000,
    " " * 500 + "x",
    "\u00a0non-breaking\u2009thin\u200bzero-width",
)  # fmt: skip


def special_token_strings(special_tokens: list[str]) -> tuple[str, ...]:
    """Strings with the repo's real special tokens mid-text: where `legacy` and lstrip/rstrip flags bite."""
    out: list[str] = []
    for token in special_tokens[:8]:
        out += [f"Hello{token}world", f"x {token} y", f"{token}Hi", f"text{token}", f" {token}  two spaces after"]
    return tuple(out)


class _Case(msgspec.Struct):
    text: str


def read_corpus(path: Path) -> tuple[str, ...]:
    """`.jsonl`: one `{"text": …}` object per line. Anything else: one string per line (newlines dropped)."""
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise InputError(f"--corpus {path}: no such file", 'give a text file or a JSONL file of {"text": …}') from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"--corpus {path}: not UTF-8 (byte {exc.start})", "re-save the corpus as UTF-8") from exc
    if path.suffix != ".jsonl":
        return tuple(raw.splitlines())
    hint = 'one JSON object a line: {"text": "…"}'
    lines = [(n, line) for n, line in enumerate(raw.splitlines(), 1) if line.strip()]
    return tuple(serde.decode_json(line, _Case, f"--corpus {path}: line {n}", hint).text for n, line in lines)
