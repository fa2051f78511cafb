"""`onboard verify-tokenizer`: tokenizer and chat-template conformance of a checkpoint, with goldens.

`verify_tokenizer(source)` loads the fast tokenizer transformers builds (what engines serve), compares it with every
independent reference the repo ships on a stress corpus, checks round trip and streamed decode, special tokens and
the stop set, the pre-tokenizer fingerprint and the chat template on fixed conversations, and diffs against (or
records) `golden_outputs/<org>__<name>/tokenizer.json`.

When no tokenizer can be built (its files are Git LFS pointers, or there is no vocabulary), whatever transformers
would build is invented, so nothing is computed from it: a fatal finding says why, and only the chat template's
checks run, on the special-token strings tokenizer_config.json declares.
"""

from __future__ import annotations

from pathlib import Path

from onboard.errors import InputError, OnboardError
from onboard.findings import Finding, exit_code_for, fatal, info
from onboard.lfs import LfsPointerError, pointer_findings
from onboard.verify_tokenizer.checks import STAGE, build_checks, stop_set
from onboard.verify_tokenizer.compare import compare, round_trip
from onboard.verify_tokenizer.conversations import TemplateCheck, check_template
from onboard.verify_tokenizer.corpus import STRESS, read_corpus, special_token_strings
from onboard.verify_tokenizer.fingerprint import fingerprint
from onboard.verify_tokenizer.goldens import golden_document, golden_path_for, record_or_compare
from onboard.verify_tokenizer.references import RepoTokenizerInfo, discover_references
from onboard.verify_tokenizer.repo import TokenizerRepo, open_tokenizer_repo
from onboard.verify_tokenizer.report import (
    TokenizerReport,
    comparison_findings,
    fingerprint_findings,
    round_trip_findings,
    summary,
)
from onboard.verify_tokenizer.special_tokens import analyse
from onboard.verify_tokenizer.subject import NO_VOCABULARY, NoVocabulary, Subject, open_subject
from onboard.verify_tokenizer.template_lookup import default_template

__all__ = ["TokenizerReport", "verify_tokenizer", "summary"]
NOT_BUILT = ("tokenizer_class", "tokenizer_length", "round_trip", "special_tokens", "fingerprint", "stop_set")


def verify_tokenizer(
    source: str,
    revision: str | None = None,
    golden_dir: Path | None = None,
    record: bool = False,
    corpus: Path | None = None,
    embedding_rows: int | None = None,
    *,
    name: str | None = None,
    golden_required: bool = False,
) -> TokenizerReport:
    """Run every tokenizer / chat-template check on SOURCE (local folder or hub repo id).

    Args:
        golden_dir: root of the goldens (default ./golden_outputs): the file is `<dir>/<key>/tokenizer.json`.
        record: write the golden instead of diffing against it.
        name: the repo id (`org/name`) to key the golden by, when SOURCE does not say it.
        golden_required: a missing golden is an InputError (the user asked to compare: `--golden DIR`).
        corpus: extra strings (JSONL `{"text": …}` or one string per line).
        embedding_rows: rows of the input embedding; by default read from the checkpoint (inspect) or config.json.
    Raises:
        InputError: unusable tokenizer files (exit 2).
    """
    repo = open_tokenizer_repo(source, revision)
    # Every tokenizer file that is a Git LFS pointer: fatal for that file, named once (size, oid, fetch command).
    findings: list[Finding] = pointer_findings(repo.pointers, repo.root, repo.repo_id)
    try:
        subject = open_subject(repo)
    except (LfsPointerError, NoVocabulary) as exc:
        return _without_tokenizer(repo, exc, findings, record)
    findings += subject.notes
    record_first = (
        f"onboard verify-tokenizer {repo.display} --golden {golden_dir} --record (or pass --name "
        "ORG/NAME when the goldens were recorded under the repo id)"
    )
    golden_path = golden_path_for(
        repo, source, golden_dir, name, required=golden_required and not record, record_first=record_first
    )
    special_strings = [t for t in subject.hf.all_special_tokens if t]
    texts = list(
        dict.fromkeys([*STRESS, *special_token_strings(special_strings), *(read_corpus(corpus) if corpus else ())])
    )
    subject_ids = subject.encode_batch(texts)

    refs, skipped = discover_references(repo.root, _repo_info(repo, subject))
    pointers = {p.file for p in repo.pointers}
    skipped = [s for s in skipped if s.file not in pointers]  # the lfs-pointer finding already says it
    comparisons = [compare(subject, texts, subject_ids, ref) for ref in refs]
    findings += comparison_findings(comparisons, skipped)
    rt = round_trip(subject, texts, subject_ids)
    findings += round_trip_findings(rt, normalizing=getattr(subject.backend, "normalizer", None) is not None)
    fp = fingerprint(subject)
    findings += fingerprint_findings(fp)

    template, template_file = default_template(repo)
    template_check = None
    if template is not None:
        template_check, template_findings = check_template(template, template_file, subject)
        findings += template_findings
    else:
        findings.append(info("no-chat-template", "no chat template in the repo (base model?)"))

    rows = embedding_rows if embedding_rows is not None else _embedding_rows(source, revision, repo, findings)
    end_of_turn = template_check.end_of_turn if template_check else []
    special, special_findings = analyse(repo, subject, end_of_turn, rows, template)
    findings += special_findings

    renders = {}
    if template_check:
        for r in template_check.renders:
            key = r.name + ("" if r.add_generation_prompt else "/no_generation_prompt")
            key += "".join(f"/{k}={v}" for k, v in sorted(r.extra.items()))
            renders[key] = {"text": r.text} if r.ok else {"error": f"{r.error_kind}: {r.message}"}
    doc = golden_document(
        repo.display, repo.revision, texts, subject_ids, renders, fp.chkhsh, fp.family, special.stop_ids
    )
    golden = record_or_compare(golden_path, doc, record, findings)
    token_of = {i: str(subject.hf.convert_ids_to_tokens(i)) for i in special.stop_ids if 0 <= i < len(subject)}
    stops = stop_set(special.stop_ids, special.declared, special.tokenizer.get("eos"), end_of_turn, token_of)
    return TokenizerReport(
        stage=STAGE,
        passed=exit_code_for(findings) == 0,
        checks=build_checks(findings, fp.family, fp.chkhsh, golden.action),
        stop_set=stops,
        source=repo.display,
        revision=repo.revision,
        tokenizer_class=subject.class_name,
        tokenizer_length=len(subject),
        corpus_strings=len(texts),
        references=comparisons,
        skipped_references=skipped,
        round_trip=rt,
        special_tokens=special,
        fingerprint=fp,
        template=template_check,
        golden=golden,
        findings=findings,
    )


def _repo_info(repo: TokenizerRepo, subject: Subject) -> RepoTokenizerInfo:
    tok_json = repo.json("tokenizer.json") or {}
    tok_config = repo.json("tokenizer_config.json") or {}
    added = {str(t): i for i, t in getattr(subject.hf, "added_tokens_decoder", {}).items()}
    named = tok_config.get("tokenizer_class") or subject.assumed_class
    return RepoTokenizerInfo(added, named, tok_json.get("pre_tokenizer"), tok_json.get("normalizer"))


def _embedding_rows(source: str, revision: str | None, repo: TokenizerRepo, findings: list[Finding]) -> int | None:
    """Embedding rows from the safetensors headers (via inspect) when there are weights, else config vocab_size."""
    config = repo.json("config.json")
    if config is None:
        findings.append(info("no-config", "no config.json: tokenizer length vs embedding rows not checked"))
        return None
    if any(f.endswith(".safetensors") for f in repo.files) or (repo.root / "model.safetensors.index.json").is_file():
        try:
            from onboard.inspect_checkpoint import inspect

            return inspect(source, revision).dims.vocab_size
        except (OnboardError, ImportError, AttributeError) as exc:
            findings.append(
                info("embedding-rows-from-config", f"inspect could not read the weights ({exc}); using config.json")
            )
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    rows = config.get("vocab_size", text.get("vocab_size"))
    return rows if isinstance(rows, int) else None


def _without_tokenizer(
    repo: TokenizerRepo, cause: InputError, findings: list[Finding], record: bool
) -> TokenizerReport:
    """The report for a folder whose tokenizer cannot be built (`cause`): a fatal finding saying why, the template
    checks that need no vocabulary, and every other check reported not run."""
    findings = list(findings)
    if isinstance(cause, NoVocabulary):
        findings.insert(0, fatal(NO_VOCABULARY, cause.message.removeprefix(f"[{NO_VOCABULARY}] "), cause.hint))
        reason = "no tokenizer vocabulary in the folder (see no-tokenizer-vocabulary)"
    else:  # LfsPointerError: its files are among repo.pointers, and the lfs-pointer finding names them
        files = ", ".join(p.file for p in cause.pointers)
        reason = f"the tokenizer is built from Git LFS pointers, not files ({files}; see lfs-pointer)"
    template_check: TemplateCheck | None = None
    try:
        template, file = default_template(repo)
        declared = repo.json("tokenizer_config.json") or {}
    except LfsPointerError:  # the template's own file is a pointer: the lfs-pointer finding names it
        pass
    else:
        if template is not None:
            template_check, template_findings = check_template(template, file, None, declared)
            findings += template_findings
        else:
            findings.append(info("no-chat-template", "no chat template in the repo (base model?)"))
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
        template=template_check,
        findings=findings,
        unknown=NOT_BUILT,
    )
