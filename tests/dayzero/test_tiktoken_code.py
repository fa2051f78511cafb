"""A tiktoken-based tokenizer that exists only as repository code (how Kimi-K2 and Qwen's first release ship one:
a rank file beside a tokenization_*.py): without --trust-remote-code onboard offers its own tiktoken loader as the
no-code reference (the regex read from the code as text, never run); with the flag the repository's tokenizer is
checked against it in the worker."""

from __future__ import annotations

import base64
import json
import shutil

import pytest

from onboard.cli import main
from onboard.verify_tokenizer.patterns import patterns_for
from onboard.verify_tokenizer.references import no_code_references, pattern_in_code
from tests.dayzero.builder import ship_tokenizer_as_code

OFFER = "onboard's own tiktoken(tiktoken.model) (tiktoken library, regex read (not run) from tokenization_dayzero.py)"


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet, inverted: vocab.json's characters -> the bytes they stand for."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    codes, extra = list(printable), 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            codes.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, codes)}


@pytest.fixture
def tiktoken_repo(dayzero, tmp_path):
    """The dayzero fixture with its tokenizer as code, plus the tiktoken ranks of its vocabulary in tiktoken.model
    and the Qwen2 regex spelled in the code as `pat_str = "|".join([...])`."""
    root = tmp_path / "tiktoken_tok"
    shutil.copytree(dayzero("llama").path, root, symlinks=True)
    ship_tokenizer_as_code(root, tmp_path / "tokenizer.canary")
    decode = _byte_decoder()
    vocab = json.loads((root / "vocab.json").read_text(encoding="utf-8"))
    lines = [f"{base64.b64encode(bytes(decode[c] for c in token)).decode()} {i}\n" for token, i in vocab.items()]
    (root / "tiktoken.model").write_text("".join(lines), encoding="ascii")
    (pattern,) = patterns_for("qwen2") or ("",)
    halves = pattern.split("|\\p{N}|")
    code = root / "tokenization_dayzero.py"
    code.write_text(code.read_text() + f'\npat_str = "|".join([{halves[0]!r}, r"\\p{{N}}", {halves[1]!r}])\n')
    return root


def test_the_regex_is_read_from_the_code_without_running_it(tiktoken_repo) -> None:
    assert pattern_in_code(tiktoken_repo) == ("tokenization_dayzero.py", patterns_for("qwen2")[0])
    (ref,) = no_code_references(tiktoken_repo)
    assert ref.name == "tiktoken(tiktoken.model)" and ref.independent is False
    assert ref.encode("Hello world<|im_end|>")[-1] == 151645  # the special token, from tokenizer_config.json


def test_without_the_flag_the_no_code_reference_is_offered(tiktoken_repo, tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(["verify-tokenizer", str(tiktoken_repo), "--golden", str(tmp_path / "g"), "--record"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and OFFER in err and "--trust-remote-code" in err, err


def test_with_the_flag_the_repository_tokenizer_is_checked_against_it(tiktoken_repo, in_process_sandbox, tmp_path,
                                                                      capsys) -> None:  # fmt: skip
    with pytest.raises(SystemExit) as info:
        main(["verify-tokenizer", str(tiktoken_repo), "--golden", str(tmp_path / "g"), "--record",
              "--trust-remote-code", "--json"])  # fmt: skip
    out, err = capsys.readouterr()
    assert info.value.code == 0, err
    (compared,) = [c for c in json.loads(out)["references"] if c["reference"] == "tiktoken(tiktoken.model)"]
    assert compared["strings"] > 50 and compared["mismatches"] == 0 and compared["error"] is None, compared
