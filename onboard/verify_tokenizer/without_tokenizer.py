"""verify-tokenizer when no tokenizer can be built: its files are Git LFS pointers, or there is no vocabulary.

Whatever transformers would build from such a folder is invented (a tokenizer of special tokens only), so nothing is
computed from it: no ids, EOS/BOS, round trip or golden. What needs no vocabulary still runs and is reported: the
chat template's renders, role handling and clock, on the special-token strings tokenizer_config.json declares.
"""

from __future__ import annotations

from onboard.errors import InputError
from onboard.findings import Finding, fatal, info
from onboard.lfs import LfsPointerError
from onboard.verify_tokenizer.checks import STAGE, build_checks
from onboard.verify_tokenizer.conversations import TemplateCheck, check_template
from onboard.verify_tokenizer.repo import TokenizerRepo
from onboard.verify_tokenizer.report import TokenizerReport
from onboard.verify_tokenizer.template_lookup import templates_in
from onboard.verify_tokenizer.vocabulary import NO_VOCABULARY, NoVocabulary

UNKNOWN = ("tokenizer_class", "tokenizer_length", "round_trip", "special_tokens", "fingerprint", "stop_set")


def without_tokenizer(repo: TokenizerRepo, cause: InputError, findings: list[Finding], record: bool) -> TokenizerReport:
    """The report for a folder whose tokenizer cannot be built (`cause`): a fatal finding saying why, the template
    checks that need no vocabulary, and every other check reported not run."""
    findings = list(findings)
    if isinstance(cause, NoVocabulary):
        findings.insert(0, fatal(NO_VOCABULARY, cause.message.removeprefix(f"[{NO_VOCABULARY}] "), cause.hint))
        reason = "no tokenizer vocabulary in the folder (see no-tokenizer-vocabulary)"
    elif isinstance(cause, LfsPointerError):  # its files are among repo.pointers: the lfs-pointer finding names them
        files = ", ".join(p.file for p in cause.pointers)
        reason = f"the tokenizer is built from Git LFS pointers, not files ({files}; see lfs-pointer)"
    else:
        raise cause
    template, template_findings = _template_without_tokenizer(repo)
    findings += template_findings
    if record:
        findings.append(
            info(
                "golden-not-recorded",
                "no tokenizer golden recorded: there is no tokenizer to record",
                "fix the fatal finding, then record again",
            )
        )
    return TokenizerReport(
        stage=STAGE,
        passed=False,
        checks=build_checks(findings, None, None, None, unavailable=reason),
        stop_set=[],
        source=repo.display,
        revision=repo.revision,
        tokenizer_class=None,
        tokenizer_length=None,
        corpus_strings=0,
        references=[],
        skipped_references=[],
        round_trip=None,
        special_tokens=None,
        fingerprint=None,
        template=template,
        golden=None,
        findings=findings,
        unknown=UNKNOWN,
    )


def _template_without_tokenizer(repo: TokenizerRepo) -> tuple[TemplateCheck | None, list[Finding]]:
    try:
        templates, file = templates_in(repo)
        declared = repo.json("tokenizer_config.json") or {}
    except LfsPointerError:  # the template's own file is a pointer: the lfs-pointer finding names it
        return None, []
    if not templates:
        return None, [info("no-chat-template", "no chat template in the repo (base model?)")]
    chosen = "default" if "default" in templates else next(iter(templates))
    return check_template(templates[chosen], file, None, declared)
