"""`onboard tokenize`: the ids SOURCE's tokenizer gives (what serving engines will see)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from onboard.cli import say
from onboard.cli.options import FILE, REVISION_OPTION, option


@click.command("tokenize")
@click.argument("source")
@option("--text", help="One string to tokenize.")
@option("--jsonl", "jsonl", type=FILE, help='JSONL input, one {"text": …} a line; prints one {"ids": […]} a line.')
@option("--add-special-tokens", is_flag=True, help="Let the tokenizer add BOS/EOS (off by default).")
@REVISION_OPTION
@option("--json", "as_json", is_flag=True, help='With --text: print {"ids": …, "tokens": …} instead of the ids.')
def tokenize_command(
    source: str, text: str | None, jsonl: Path | None, add_special_tokens: bool, revision: str | None, as_json: bool
) -> None:
    """Tokenize --text or a --jsonl file with SOURCE's tokenizer (transformers AutoTokenizer, offline).

    \b
    Examples:
      onboard tokenize ./my-checkpoint --text "Hello world"
      onboard tokenize Qwen/Qwen3-8B --jsonl prompts.jsonl > ids.jsonl
    """
    from onboard.errors import InputError
    from onboard.verify_tokenizer.corpus import read_corpus
    from onboard.verify_tokenizer.repo import open_tokenizer_repo, pointer_notes
    from onboard.verify_tokenizer.subject import open_subject

    if (text is None) == (jsonl is None):
        raise click.UsageError("give exactly one of --text or --jsonl")
    if jsonl is not None and jsonl.suffix != ".jsonl":
        raise InputError(f"--jsonl {jsonl}: expected a .jsonl file", 'write one {"text": "…"} object per line')
    repo = open_tokenizer_repo(source, revision)
    subject = open_subject(repo)  # exit 2 when its files are LFS pointers or there is no vocabulary
    for note in subject.notes:  # e.g. the class assumed for a raw vocab.json + merges.txt export
        say(f"warning: [{note.code}] {note.message}")
    for line in pointer_notes(repo):  # pointers the tokenizer is not built from (e.g. tokenizer.model)
        say(line)
    texts = [text] if text is not None else list(read_corpus(jsonl))  # type: ignore[arg-type]
    batch = subject.encode_batch(texts, add_special_tokens=add_special_tokens)
    out = sys.stdout
    if jsonl is not None:
        for ids in batch:
            out.write(json.dumps({"ids": ids}) + "\n")
    elif as_json:
        ids = batch[0]
        out.write(json.dumps({"ids": ids, "tokens": subject.hf.convert_ids_to_tokens(ids)}, ensure_ascii=False) + "\n")
    else:
        out.write(" ".join(map(str, batch[0])) + "\n")
