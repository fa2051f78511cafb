"""The stage-result checks of verify-tokenizer (onboard.checks.Check), derived from its findings.

The checklist ticks `tokenizer_parity`, `chat_template_parity` and `declared_stop_set`; the finer checks say where a
failure is. The stage passes (no error finding) exactly when every required check passes, because every error fails
`chat_template_parity` (template errors) or `tokenizer_parity` (everything else).
"""

from __future__ import annotations

from dataclasses import dataclass

from onboard.checks import Check
from onboard.findings import Finding

STAGE = "verify-tokenizer"
FAILING = ("error", "fatal")

# check -> finding-code prefixes that concern it. A finding may concern several checks.
CHECK_CODES: dict[str, tuple[str, ...]] = {
    "tokenizer_parity": ("reference-", "tokenizer-json-mismatch", "golden-drift-ids", "golden-drift-fingerprint"),
    "chat_template_parity": ("template-", "double-bos", "golden-drift-render"),
    "declared_stop_set": (
        "eos-mismatch",
        "eos-id-out-of-range",
        "end-of-turn-not-stop",
        "eos-config-disagreement",
        "pad-equals-eos",
        "golden-drift-stop-set",
    ),
    "round_trip": ("roundtrip-", "stream-decode-"),
    "special_tokens": (
        "bos-",
        "eos-flag-",
        "eos-out-of-range",
        "pad-",
        "unk-",
        "tokenizer-exceeds-embedding",
        "special-token-not-special",
    ),
    "goldens_match": ("golden-drift-",),
}
REQUIRED = {"fingerprint_known": False}
"""Every check is required except these: a new pre-tokenizer is worth knowing, not a reason to stop."""


@dataclass(frozen=True)
class StopToken:
    id: int
    token: str
    sources: list[str]
    """Why it stops generation: tokenizer_eos, config.json, generation_config.json, end_of_turn (template)."""


def concerns(code: str, check: str) -> bool:
    return any(code.startswith(prefix) for prefix in CHECK_CODES.get(check, ()))


def _describe(findings: list[Finding], limit: int = 3) -> str:
    shown = "; ".join(f"{f.code}: {f.message[:160]}" for f in findings[:limit])
    return shown + (f" (+{len(findings) - limit} more)" if len(findings) > limit else "")


def build_checks(
    findings: list[Finding],
    family: str | None,
    chkhsh: str | None,
    golden_action: str | None,
    unavailable: str | None = None,
) -> list[Check]:
    """The checks in a stable order; `goldens_match` only when a golden was compared or recorded. `unavailable`: why
    no tokenizer could be built; then every check but the template's is reported not run (never passed)."""
    failing = [f for f in findings if f.severity in FAILING]
    checks: list[Check] = []
    built = unavailable is None
    for name in CHECK_CODES:
        if name == "goldens_match" and (not built or golden_action not in ("compared", "recorded")):
            continue
        if not built and name != "chat_template_parity":
            checks.append(Check(name, False, True, f"not run: {unavailable}"))
            continue
        bad = [f for f in failing if concerns(f.code, name)]
        if name == "tokenizer_parity":
            # Any error the template is not to blame for fails the tokenizer item of the checklist.
            bad = [f for f in failing if not concerns(f.code, "chat_template_parity")]
        warned = [f for f in findings if f.severity == "warning" and concerns(f.code, name) and built]
        detail = _detail(name, bad, warned, findings, golden_action)
        checks.append(Check(name, not bad, REQUIRED.get(name, True), detail))
    if not built:
        checks.append(Check("fingerprint_known", False, REQUIRED["fingerprint_known"], f"not run: {unavailable}"))
        return checks
    known = family is not None
    checks.append(
        Check(
            "fingerprint_known",
            known,
            REQUIRED["fingerprint_known"],
            f"tokenizer family {family}"
            if known
            else f"new pre-tokenizer (chkhsh {(chkhsh or '')[:16]}…); llama.cpp's "
            "table lists byte-level BPE pre-tokenizers only, SentencePiece-style ones never match",
        )
    )
    return checks


def _detail(name: str, bad: list[Finding], warned: list[Finding], findings: list[Finding], golden: str | None) -> str:
    if bad:
        return _describe(bad)
    if name == "goldens_match":
        return "golden recorded by this run" if golden == "recorded" else "no drift from the golden"
    if name == "tokenizer_parity":
        matches = [f.message for f in findings if f.code == "reference-match"]
        ok = "; ".join(matches) if matches else "no independent reference: checked by round trip and goldens only"
        return ok + (f"; warnings: {_describe(warned)}" if warned else "")
    return "ok" + (f"; warnings: {_describe(warned)}" if warned else "")


def stop_set(
    stop_ids: list[int],
    declared: dict[str, dict[str, list[int]]],
    tokenizer_eos: int | None,
    end_of_turn: list[int],
    token_of: dict[int, str],
) -> list[StopToken]:
    """Every EOS id plus the end-of-turn tokens the template emits, each with the files that make it a stop token."""
    out = []
    for token_id in stop_ids:
        sources = ["tokenizer_eos"] if token_id == tokenizer_eos else []
        sources += [
            file
            for file in ("config.json", "generation_config.json")
            if token_id in declared.get(file, {}).get("eos", [])
        ]
        sources += ["end_of_turn"] if token_id in end_of_turn else []
        out.append(StopToken(token_id, token_of.get(token_id, f"<id {token_id}>"), sources))
    return out
