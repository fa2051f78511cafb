"""The verify-tokenizer report (JSON via serde) and its human summary, plus the findings the comparisons imply."""

from __future__ import annotations

from dataclasses import dataclass, field

from onboard.checks import Check
from onboard.findings import Finding, error, exit_code_for, info, warning
from onboard.verify_tokenizer.checks import StopToken
from onboard.verify_tokenizer.compare import Comparison, RoundTrip
from onboard.verify_tokenizer.conversations import TemplateCheck
from onboard.verify_tokenizer.fingerprint import Fingerprint
from onboard.verify_tokenizer.goldens import GoldenStatus
from onboard.verify_tokenizer.references import Skipped
from onboard.verify_tokenizer.special_tokens import SpecialTokens


@dataclass(frozen=True)
class TokenizerReport:
    """The stage result: `stage`, `passed`, `checks` and `stop_set` first (the shared contract), then the details."""

    stage: str
    passed: bool
    """No error or fatal finding (equivalently: every required check passed)."""
    checks: list[Check]
    stop_set: list[StopToken]
    """Every EOS id plus the template's end-of-turn tokens: what the validate stage expects the endpoint to stop on."""
    source: str
    revision: str | None
    tokenizer_class: str | None = None
    tokenizer_length: int | None = None
    corpus_strings: int = 0
    references: list[Comparison] = field(default_factory=list)
    skipped_references: list[Skipped] = field(default_factory=list)
    round_trip: RoundTrip | None = None
    special_tokens: SpecialTokens | None = None
    fingerprint: Fingerprint | None = None
    template: TemplateCheck | None = None
    golden: GoldenStatus | None = None
    findings: list[Finding] = field(default_factory=list)
    unknown: tuple[str, ...] = ()
    """Fields not established because no tokenizer could be built (a fatal finding says why): "unknown" in JSON."""

    @property
    def exit_code(self) -> int:
        return exit_code_for(self.findings)


def comparison_findings(comparisons: list[Comparison], skipped: list[Skipped]) -> list[Finding]:
    out: list[Finding] = []
    for c in comparisons:
        if c.error:
            out.append(
                warning("reference-failed", f"{c.reference} could not encode the corpus: {c.error}", file=c.file)
            )
        if c.first is not None:
            d = c.first
            code = "reference-mismatch" if c.independent else "tokenizer-json-mismatch"
            why = "" if c.independent else " (transformers builds a different tokenizer than tokenizer.json describes)"
            out.append(
                error(
                    code,
                    f"{c.mismatches}/{c.strings} strings differ from {c.reference}{why}; first: {d.text[:80]!r} at token "
                    f"{d.position}: fast {d.subject_ids[d.position : d.position + 8]} {d.subject_tokens[d.position : d.position + 8]} "
                    f"vs reference {d.reference_ids[d.position : d.position + 8]} {d.reference_tokens[d.position : d.position + 8]}",
                    "compare pre-tokenizer regex, merges, normalizer and `legacy` between the files; --json has both id lists",
                    file=c.file,
                )
            )
        elif not c.error:
            out.append(info("reference-match", f"{c.strings}/{c.strings} strings match {c.reference}", file=c.file))
    for s in skipped:
        out.append(
            info(
                "reference-skipped", f"{s.kind} reference from {s.file} skipped: {s.reason}", _skip_hint(s), file=s.file
            )
        )
    if not any(c.independent for c in comparisons):
        out.append(
            info(
                "no-independent-reference",
                "no independent reference tokenizer in the repo (only tokenizer.json): "
                "ids are checked against goldens and round trip only",
                "a slow tokenizer file in the repo (tokenizer.model, vocab.json + merges.txt, *.tiktoken, "
                "tekken.json) is compared automatically; --record now and later runs diff against the golden",
            )
        )
    return out


def _skip_hint(skipped: Skipped) -> str:
    """What would let the skipped reference be compared."""
    if "LFS pointer" in skipped.reason:
        return f"fetch the real {skipped.file} (git lfs pull, or hf download) and rerun to compare against it"
    if "pre-tokenizer" in skipped.reason:
        return "add the pre-tokenizer's regex to onboard/data/pretokenizer_regexes.json to compare against it"
    return (
        f"fix {skipped.file} (or remove it) to compare against it; until then ids are checked by round trip and goldens"
    )


def round_trip_findings(rt: RoundTrip, normalizing: bool) -> list[Finding]:
    """A tokenizer with a normalizer (NFC, lowercasing) is lossy by design: then only an info."""
    out: list[Finding] = []
    if rt.first_lossy:
        text, got = rt.first_lossy
        out.append(
            (info if normalizing else warning)(
                "roundtrip-lossy",
                f"decode(encode(x)) != x for {rt.lossy}/{rt.strings} strings; first: {text[:60]!r} -> {got[:60]!r}",
                "expected for normalizing tokenizers; otherwise a decoder bug",
            )
        )
    if rt.first_stream_mismatch:
        full, got = rt.first_stream_mismatch
        out.append(
            error(
                "stream-decode-mismatch",
                f"streamed (incremental) decode differs from full decode for "
                f"{rt.stream_mismatches}/{rt.streamed} strings; first: full {full[:60]!r} streamed {got[:60]!r}",
                "serving engines detokenize incrementally: users would see different text",
            )
        )
    return out


def fingerprint_findings(fp: Fingerprint) -> list[Finding]:
    if fp.family:
        return [info("tokenizer-family", f"tokenizer family: {fp.family} (llama.cpp chkhsh {fp.chkhsh[:12]}…)")]
    return [
        info(
            "new-pre-tokenizer",
            f"new pre-tokenizer: chkhsh {fp.chkhsh} matches no known family",
            "llama.cpp's convert_hf_to_gguf refuses unknown BPE pre-tokenizers until they are registered",
        )
    ]


def summary(report: TokenizerReport) -> str:
    """Fatal findings lead; what could not be established without a tokenizer is named once, never shown."""
    lines = [f"verify-tokenizer {report.source} (revision {report.revision or 'unknown'})"]
    for f in report.findings:
        if f.severity == "fatal":
            lines.append(f"  UNUSABLE [{f.code}] {f.message}")
            lines += [f"    fix: {f.hint}"] if f.hint else []
    if report.unknown:
        lines.append(f"  tokenizer: not built; unknown: {', '.join(report.unknown)}")
    else:
        lines.append(
            f"  tokenizer: {report.tokenizer_class}, {report.tokenizer_length} tokens; "
            f"corpus {report.corpus_strings} strings"
        )
    for c in report.references:
        state = "error: " + c.error if c.error else ("match" if not c.mismatches else f"{c.mismatches} differ")
        lines.append(f"  reference {c.reference}: {state} ({c.seconds:.2f} s)")
    fp, special = report.fingerprint, report.special_tokens
    if fp is not None and special is not None:
        lines.append(f"  family: {fp.family or 'new pre-tokenizer'}; stop set: {', '.join(special.stop_tokens)}")
    if report.template and report.template.generation_prompt is not None:
        lines.append(f"  generation prompt: {report.template.generation_prompt!r}")
    if report.golden:
        lines.append(f"  golden: {report.golden.action} {report.golden.path}")
    states = [
        c.name
        + ("" if c.passed else " not run" if c.detail.startswith("not run") else " FAILED")
        + ("" if c.required else " (optional)")
        for c in report.checks
    ]
    lines.append(f"  checks: {', '.join(states)}")
    order = {"fatal": 0, "error": 1, "warning": 2, "info": 3}
    for f in sorted(report.findings, key=lambda f: order[f.severity]):
        if f.severity == "fatal":
            continue  # shown first, above
        if f.severity != "info" or f.code in ("tokenizer-family", "new-pre-tokenizer"):
            lines.append(f"  {f.severity}: [{f.code}] {f.message}")
    counts = {s: sum(f.severity == s for f in report.findings) for s in ("error", "warning")}
    lines.append(f"  {counts['error']} errors, {counts['warning']} warnings")
    return "\n".join(lines)
