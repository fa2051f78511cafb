"""verify-tokenizer's stage-result checks: which finding fails which check, the passed <=> required-checks invariant,
and agreement with what promotion derives from a findings-only report (onboard/promote/stage_results.py)."""

from __future__ import annotations

import pytest

from onboard.findings import Finding
from onboard.promote.stage_results import derive_tokenizer_checks
from onboard.verify_tokenizer.checks import REQUIRED, StopToken, build_checks, stop_set

CHECKLIST_NAMES = {"tokenizer_parity", "chat_template_parity", "declared_stop_set"}
# (code, severity) -> checks it must fail. Every error fails tokenizer_parity unless the template is to blame.
CASES = {
    ("reference-mismatch", "error"): {"tokenizer_parity"},
    ("tokenizer-json-mismatch", "error"): {"tokenizer_parity"},
    ("stream-decode-mismatch", "error"): {"round_trip", "tokenizer_parity"},
    ("eos-mismatch", "error"): {"declared_stop_set", "tokenizer_parity"},
    ("end-of-turn-not-stop", "error"): {"declared_stop_set", "tokenizer_parity"},
    ("bos-flag-contradiction", "error"): {"special_tokens", "tokenizer_parity"},
    ("eos-out-of-range", "error"): {"special_tokens", "tokenizer_parity"},
    ("tokenizer-exceeds-embedding", "error"): {"special_tokens", "tokenizer_parity"},
    ("double-bos", "error"): {"chat_template_parity"},
    ("template-unusable", "error"): {"chat_template_parity"},
    ("golden-drift-render", "error"): {"chat_template_parity", "goldens_match"},
    ("golden-drift-ids", "error"): {"tokenizer_parity", "goldens_match"},
    ("golden-drift-fingerprint", "error"): {"tokenizer_parity", "goldens_match"},
    ("golden-drift-stop-set", "error"): {"declared_stop_set", "goldens_match", "tokenizer_parity"},
    # Warnings and infos fail nothing (they show up in the detail).
    ("pad-equals-eos", "warning"): set(),
    ("template-rejects-system", "warning"): set(),
    ("special-token-not-special", "warning"): set(),
    ("roundtrip-lossy", "warning"): set(),
}


def _checks(findings: list[Finding], family: str | None = "qwen2", golden: str | None = "compared") -> dict:
    return {c.name: c for c in build_checks(findings, family, "ab" * 32, golden)}


@pytest.mark.parametrize(("code", "severity"), list(CASES), ids=[c for c, _ in CASES])
def test_finding_fails_exactly_its_checks(code: str, severity: str) -> None:
    finding = Finding(code, severity, f"seeded {code}")
    checks = _checks([finding])
    assert {n for n, c in checks.items() if not c.passed} == CASES[(code, severity)]
    passed_stage = severity not in ("error", "fatal")
    # The stage passes exactly when every required check does.
    assert passed_stage == all(c.passed for c in checks.values() if c.required)
    failing = [c for c in checks.values() if not c.passed]
    assert all(code in c.detail for c in failing)
    if severity == "warning" and code != "template-rejects-system":
        assert any(code in c.detail for c in checks.values())  # warnings are named in a passing check's detail

    # Promotion derives the checklist checks from findings when a report has none: never stricter than ours.
    derived = {c.name: c.passed for c in derive_tokenizer_checks({"findings": [{"code": code, "severity": severity}]})}
    assert derived["chat_template_parity"] == checks["chat_template_parity"].passed
    for name in CHECKLIST_NAMES:
        assert derived[name] or not checks[name].passed, name


def test_names_required_flags_and_optional_checks() -> None:
    checks = build_checks([], None, "cd" * 32, "missing")
    names = [c.name for c in checks]
    assert names == ["tokenizer_parity", "chat_template_parity", "declared_stop_set", "round_trip", "special_tokens",
                     "fingerprint_known"]  # fmt: skip
    fp = checks[-1]
    assert not fp.passed and not fp.required and "new pre-tokenizer" in fp.detail and REQUIRED[fp.name] is False
    assert all(c.required and c.passed for c in checks[:-1])
    recorded = {c.name: c for c in build_checks([], "llama-bpe", "cd" * 32, "recorded")}
    assert recorded["goldens_match"].passed and "recorded" in recorded["goldens_match"].detail
    assert recorded["fingerprint_known"].passed and "llama-bpe" in recorded["fingerprint_known"].detail


def test_stop_set_names_every_source() -> None:
    declared = {"config.json": {"eos": [128001]}, "generation_config.json": {"eos": [128001, 128008, 128009]}}
    tokens = {128001: "<|end_of_text|>", 128008: "<|eom_id|>", 128009: "<|eot_id|>"}
    got = stop_set([128001, 128008, 128009], declared, 128009, [128009], tokens)
    assert got == [
        StopToken(128001, "<|end_of_text|>", ["config.json", "generation_config.json"]),
        StopToken(128008, "<|eom_id|>", ["generation_config.json"]),
        StopToken(128009, "<|eot_id|>", ["tokenizer_eos", "generation_config.json", "end_of_turn"]),
    ]
