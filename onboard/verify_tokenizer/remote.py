"""verify-tokenizer when the tokenizer exists only as the repository's code (auto_map AutoTokenizer).

Without --trust-remote-code that is an InputError naming the rerun command. With it, the checks run in the sandbox
worker (the repository's tokenizer is the subject, our own loaders the references), and the golden step runs here,
where the user's golden folder is: the worker returns its report and the golden document as data.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from pathlib import Path
from typing import Any

from onboard import reference, serde
from onboard.errors import InputError
from onboard.findings import exit_code_for
from onboard.reference import RemoteCodePolicy, remote_code_allowed, tokenizer_needs_code
from onboard.verify_tokenizer import verify_tokenizer
from onboard.verify_tokenizer.checks import build_checks
from onboard.verify_tokenizer.corpus import read_corpus
from onboard.verify_tokenizer.goldens import golden_path_for, read_golden, record_or_compare
from onboard.verify_tokenizer.references import no_code_references
from onboard.verify_tokenizer.repo import TokenizerRepo, open_tokenizer_repo
from onboard.verify_tokenizer.report import TokenizerReport

WORKER = "onboard.verify_tokenizer.remote:verify_in_worker"


def verify_tokenizer_trusting(
    source: str,
    revision: str | None = None,
    golden_dir: Path | None = None,
    record: bool = False,
    corpus: Path | None = None,
    embedding_rows: int | None = None,
    *,
    policy: RemoteCodePolicy,
    rerun: str,
    **options: Any,
) -> TokenizerReport:
    """`verify_tokenizer`, where a tokenizer that needs the repository's code runs in the sandbox (if `policy`
    allows; else InputError naming `rerun`). `options`: verify_tokenizer's keyword options (name, …)."""
    repo = open_tokenizer_repo(source, revision)
    needs = tokenizer_needs_code(repo.root)
    if needs is None:
        return verify_tokenizer(source, revision, golden_dir, record, corpus, embedding_rows, **options)
    if not policy.trust_remote_code:
        offered = no_code_references(repo.root)  # e.g. its tiktoken ranks, with our own loader
        offer = (
            f"; without running it, onboard's own {offered[0].name} ({offered[0].note}) tokenizes these files, and "
            "the rerun checks it against the repository's tokenizer in the sandbox"
            if offered
            else ""
        )
        raise InputError(
            f"{repo.display}: {needs}; onboard runs it only when asked, in a sandbox{offer}",
            f"review the repository's tokenizer .py files, then: {rerun}",
        )
    golden_path = golden_path_for(
        repo,
        source,
        golden_dir,
        options.get("name"),  # before the worker starts
        required=bool(options.get("golden_required")) and not record,
        record_first=f"{rerun} --golden {golden_dir} --record",
    )
    kwargs = {
        "root": str(repo.root),
        "corpus": list(read_corpus(corpus)) if corpus else None,
        "embedding_rows": embedding_rows,
    }
    data = reference.run_in_sandbox(WORKER, kwargs, repo.root, policy)
    return _with_golden(serde.from_dict(TokenizerReport, data["report"]), data["golden"], repo, golden_path, record)


def verify_in_worker(root: str, corpus: list[str] | None, embedding_rows: int | None) -> dict[str, Any]:
    """Worker side: every check on `root` with the repository's tokenizer; the golden recorded into the temp dir."""
    # Removed on return: in the sandbox $TMPDIR goes with the worker, but in-process (tests, --unsafe-no-sandbox)
    # it is the user's /tmp.
    with tempfile.TemporaryDirectory(prefix="tokenizer-") as name:
        tmp = Path(name)
        corpus_file = None
        if corpus:
            corpus_file = tmp / "corpus.jsonl"
            corpus_file.write_text("".join(json.dumps({"text": t}) + "\n" for t in corpus), encoding="utf-8")
        with remote_code_allowed():
            report = verify_tokenizer(root, None, tmp / "golden", True, corpus_file, embedding_rows)
        golden = read_golden(Path(report.golden.path)) if report.golden else None  # None: no tokenizer was built
    return {"report": serde.to_dict(report), "golden": golden}


def _with_golden(
    report: TokenizerReport, doc: dict[str, Any], repo: TokenizerRepo, path: Path, record: bool
) -> TokenizerReport:
    """The worker's report with the golden step done here (record, or compare against the user's golden)."""
    if report.fingerprint is None:  # no tokenizer was built in the worker: nothing to record or compare
        return dataclasses.replace(report, source=repo.display, revision=repo.revision)
    findings = list(report.findings)
    golden = record_or_compare(path, doc, record, findings)
    checks = build_checks(findings, report.fingerprint.family, report.fingerprint.chkhsh, golden.action)
    return dataclasses.replace(
        report,
        source=repo.display,
        revision=repo.revision,
        golden=golden,
        findings=findings,
        checks=checks,
        passed=exit_code_for(findings) == 0,
    )
