"""`onboard verify-tokenizer`: tokenizer and chat-template conformance, with goldens."""

from __future__ import annotations

from pathlib import Path

import click

from onboard.cli import emit_json, say
from onboard.cli.options import FILE, FOLDER, REVISION_OPTION, option, policy_from, remote_code_options


@click.command("verify-tokenizer")
@click.argument("source")
@REVISION_OPTION
@option(
    "--golden",
    "golden_dir",
    type=FOLDER,
    help="Root of the goldens (default ./golden_outputs); the file is <DIR>/<org>__<name>/tokenizer.json.",
)
@option("--record", is_flag=True, help="Write the golden instead of diffing against it.")
@option(
    "--name",
    help="Repo id ORG/NAME to key the golden by (default: from a hub id, a hub cache path or config.json's "
    "_name_or_path, else the folder name).",
)
@option("--corpus", type=FILE, help='Extra strings: JSONL of {"text": …} or one string per line.')
@option("--embedding-rows", type=click.IntRange(min=1), help="Embedding row count (default: the checkpoint's).")
@remote_code_options
@option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout.")
def verify_tokenizer_command(
    source: str,
    revision: str | None,
    golden_dir: Path | None,
    record: bool,
    name: str | None,
    corpus: Path | None,
    embedding_rows: int | None,
    trust_remote_code: bool,
    unsafe_no_sandbox: bool,
    as_json: bool,
) -> int:
    """Check SOURCE's tokenizer against every reference it ships, its special tokens and its chat template.

    Exit 0 when no check found an error, 1 when one did, 2 when the tokenizer files are unusable or --golden DIR
    holds nothing recorded for this repository (record it with --record). A tokenizer that exists only as the
    repository's code (auto_map) is checked only with --trust-remote-code, in a sandboxed worker.

    \b
    Examples:
      onboard verify-tokenizer ./my-checkpoint
      onboard verify-tokenizer Qwen/Qwen3-8B --record
      onboard verify-tokenizer ./ckpt --corpus prompts.jsonl --json
    """
    from onboard.reference import rerun_command
    from onboard.verify_tokenizer import summary
    from onboard.verify_tokenizer.remote import verify_tokenizer_trusting

    policy = policy_from(trust_remote_code, unsafe_no_sandbox)
    rerun = rerun_command("verify-tokenizer", source, *(["--record"] if record else []), policy=policy)
    report = verify_tokenizer_trusting(
        source,
        revision,
        golden_dir,
        record,
        corpus,
        embedding_rows,
        policy=policy,
        rerun=rerun,
        name=name,
        golden_required=golden_dir is not None and not record,
    )
    if as_json:
        emit_json(report)
    say(summary(report))
    return report.exit_code
