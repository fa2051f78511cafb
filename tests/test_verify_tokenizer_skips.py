"""Every reference verify-tokenizer could not compare says what would let it compare (a skip is never silent)."""

from __future__ import annotations

from onboard.verify_tokenizer.references import Skipped
from onboard.verify_tokenizer.report import comparison_findings


def test_every_skipped_reference_names_what_would_check_it() -> None:
    skipped = [
        Skipped("sentencepiece", "tokenizer.model", "the file is a Git LFS pointer, not the model"),
        Skipped("tiktoken", "tokenizer.tiktoken", "no known pre-tokenizer regex for 200019 ranks"),
        Skipped("vocab+merges", "vocab.json", "vocab.json without merges.txt"),
    ]
    findings = comparison_findings([], skipped)
    assert [f.code for f in findings] == ["reference-skipped"] * 3 + ["no-independent-reference"]
    assert all(f.hint for f in findings), [f for f in findings if not f.hint]
    hints = [f.hint for f in findings]
    assert "git lfs pull" in hints[0]
    assert "pretokenizer_regexes.json" in hints[1] and "fix vocab.json" in hints[2]
