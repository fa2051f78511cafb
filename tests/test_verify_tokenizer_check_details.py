"""verify-tokenizer's check details and the no-tokenizer path, value by value (issue 16, from the survivors of
verify_tokenizer/checks.py: the pass/fail flags were tested, the text people read and the not-run path were not)."""

from __future__ import annotations

from onboard.findings import Finding
from onboard.verify_tokenizer.checks import build_checks, stop_set


def by_name(checks: list) -> dict:
    return {c.name: c for c in checks}


def test_without_a_tokenizer_only_the_template_check_runs() -> None:
    template_error = Finding("template-unusable", "error", "the template does not parse")
    other_error = Finding("eos-mismatch", "error", "eos differs")
    checks = build_checks([other_error], None, None, "compared", unavailable="no vocabulary")
    assert [c.name for c in checks] == ["tokenizer_parity", "chat_template_parity", "declared_stop_set", "round_trip",
                                        "special_tokens", "fingerprint_known"]  # fmt: skip
    named = by_name(checks)
    assert named["chat_template_parity"].passed and named["chat_template_parity"].detail == "ok"
    for name in ("tokenizer_parity", "declared_stop_set", "round_trip", "special_tokens", "fingerprint_known"):
        assert (named[name].passed, named[name].detail) == (False, "not run: no vocabulary"), name
    assert [c.required for c in checks] == [True, True, True, True, True, False]
    failed = by_name(build_checks([template_error], None, None, None, unavailable="no vocabulary"))
    assert not failed["chat_template_parity"].passed
    assert failed["chat_template_parity"].detail == "template-unusable: the template does not parse"


def test_details_name_the_references_the_warnings_and_the_golden() -> None:
    findings = [
        Finding("reference-match", "info", "ids equal to sentencepiece on 120 strings"),
        Finding("reference-match", "info", "ids equal to tiktoken on 120 strings"),
        Finding("roundtrip-lossy", "warning", "3 strings do not round-trip"),
    ]
    named = by_name(build_checks(findings, "llama-bpe", "ab" * 32, "compared"))
    assert named["tokenizer_parity"].detail == (
        "ids equal to sentencepiece on 120 strings; ids equal to tiktoken on 120 strings"
    )
    assert named["round_trip"].detail == "ok; warnings: roundtrip-lossy: 3 strings do not round-trip"
    assert named["special_tokens"].detail == "ok"
    assert named["goldens_match"].detail == "no drift from the golden"
    assert named["fingerprint_known"].detail == "tokenizer family llama-bpe"
    lone = by_name(
        build_checks([Finding("reference-mismatch", "warning", "1 id differs")], None, "0123456789abcdef99", None)
    )
    assert lone["tokenizer_parity"].detail == (
        "no independent reference: checked by round trip and goldens only; warnings: reference-mismatch: 1 id differs"
    )
    assert lone["fingerprint_known"].detail.startswith("new pre-tokenizer (chkhsh 0123456789abcdef…)")
    assert "goldens_match" not in lone


def test_a_failing_detail_shows_three_findings_cut_to_160_characters() -> None:
    findings = [Finding(f"roundtrip-{i}", "error", f"string {i} " + "x" * 200) for i in range(5)]
    detail = by_name(build_checks(findings, "gpt2", None, None))["round_trip"].detail
    parts = detail.split("; ")
    assert len(parts) == 3 and detail.endswith(" (+2 more)")
    assert parts[0] == "roundtrip-0: " + ("string 0 " + "x" * 200)[:160]
    exactly_three = by_name(build_checks(findings[:3], "gpt2", None, None))["round_trip"].detail
    assert "more" not in exactly_three and exactly_three.count("roundtrip-") == 3


def test_a_stop_token_without_a_name_is_shown_by_id() -> None:
    assert stop_set([7], {}, None, [], {})[0].token == "<id 7>"
    assert stop_set([7], {}, None, [], {})[0].sources == []
