"""Can DRAFT's tokens be verified by TARGET at all? Checked before any weight is loaded: the same ids for the
verify-tokenizer corpus and the special tokens (else `incompatible-draft`), and every id the draft can propose a row
of the target's embedding (else a finding with the draft-to-target id map an engine needs).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from onboard.errors import ChecksFailed, InputError
from onboard.findings import Finding, info, warning

MAX_SHOWN = 12  # mapping entries shown in a finding's message (all are in the JSON)


class IncompatibleDraft(ChecksFailed):
    """The draft's tokenizer disagrees with the target's: its proposals mean other text to the target (exit 1)."""

    code = "incompatible-draft"


@dataclass(frozen=True)
class Compatibility:
    findings: tuple[Finding, ...]
    corpus_strings: int
    target_rows: int
    draft_rows: int
    vocab_mapping: dict[int, int | None] = field(default_factory=dict)
    """Draft id -> the target id of the same token (None: none) for every draft id the target reads differently or
    cannot read."""


def embedding_rows(folder: Path) -> int:
    """config.json's vocab_size (text_config's for multimodal wrappers): the embedding and head rows; InputError
    naming the field for a value no embedding can have."""
    from onboard.verify_tokenizer.special_tokens import MAX_TOKEN_ID

    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    rows = config.get("vocab_size") or (config.get("text_config") or {}).get("vocab_size") or 0
    if not isinstance(rows, int) or isinstance(rows, bool) or not 0 <= rows <= MAX_TOKEN_ID + 1:
        raise InputError(
            f"{folder.name}/config.json: vocab_size {rows!r} is not an embedding's row count",
            "set vocab_size to the rows of the checkpoint's embedding (onboard inspect shows them)",
        )
    return rows


def check_compatibility(target: Path, draft: Path) -> Compatibility:
    """Raises IncompatibleDraft naming the first differing corpus string or special token."""
    from onboard.verify_tokenizer.corpus import STRESS, special_token_strings
    from onboard.verify_tokenizer.special_tokens import checkpoint_stop_set

    target_tok, draft_tok = _subject(target), _subject(draft)
    specials = list(target_tok.hf.all_special_tokens)
    corpus = [*STRESS, *special_token_strings(specials)]
    _same_ids(corpus, target_tok, draft_tok, target, draft)
    _same_specials(specials, target_tok, draft_tok, draft)
    findings: list[Finding] = []
    stops = checkpoint_stop_set(target), checkpoint_stop_set(draft)
    if stops[0] != stops[1]:
        findings.append(
            warning(
                "draft-stop-set-differs",
                f"the draft's stop set {stops[1]} is not the target's {stops[0]}: the target's stop set ends generation "
                "(engines stop on the target's), but a draft that does not stop where its target does wastes proposals",
                "give the draft the target's generation_config.json eos_token_id",
                file=f"{draft.name}/generation_config.json",
            )
        )
    target_rows, draft_rows = embedding_rows(target), embedding_rows(draft)
    mapping = _mapping(target_tok, draft_tok, target_rows, draft_rows)
    if mapping:
        findings.append(_mapping_finding(mapping, target_rows, draft_rows, draft))
    else:
        findings.append(
            info(
                "draft-vocab-inside-target",
                f"the draft's {draft_rows} vocabulary rows ({len(draft_tok)} tokens) are inside the target's embedding "
                f"({target_rows} rows) with the same ids",
            )
        )
    return Compatibility(tuple(findings), len(corpus), target_rows, draft_rows, mapping)


def _subject(folder: Path) -> Any:
    from onboard.verify_tokenizer.repo import open_tokenizer_repo
    from onboard.verify_tokenizer.subject import open_subject

    return open_subject(open_tokenizer_repo(str(folder)))


def _same_ids(corpus: list[str], target_tok: Any, draft_tok: Any, target: Path, draft: Path) -> None:
    mine, theirs = target_tok.encode_batch(corpus), draft_tok.encode_batch(corpus)
    for text, a, b in zip(corpus, mine, theirs):
        if a != b:
            at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            raise IncompatibleDraft(
                f"incompatible-draft: {draft.name}'s tokenizer encodes {_quote(text)} differently from "
                f"{target.name}'s (first difference at token {at}: target {a[at : at + 3]}, draft {b[at : at + 3]}); "
                "its proposals would mean other text to the target",
                "use a draft with the target's tokenizer (same family and release), or an n-gram draft (DRAFT=ngram)",
            )


def _same_specials(specials: list[str], target_tok: Any, draft_tok: Any, draft: Path) -> None:
    for token in specials:
        if target_tok.token_id(token) != draft_tok.token_id(token):
            raise IncompatibleDraft(
                f"incompatible-draft: special token {token!r} is id {target_tok.token_id(token)} in the target and "
                f"{draft_tok.token_id(token)} in {draft.name}",
                "use a draft with the target's special tokens (same tokenizer_config.json / added_tokens.json)",
            )


def _mapping(target_tok: Any, draft_tok: Any, target_rows: int, draft_rows: int) -> dict[int, int | None]:
    """Draft ids the target reads as another token or cannot read (past its rows), mapped to the target's id."""
    target_vocab = target_tok.hf.get_vocab()
    target_by_id = {i: t for t, i in target_vocab.items()}
    out: dict[int, int | None] = {}
    for token, draft_id in draft_tok.hf.get_vocab().items():
        if target_by_id.get(draft_id) != token or draft_id >= target_rows:
            found = target_vocab.get(token)
            out[draft_id] = found if found is not None and found < target_rows else None
    for row in range(max(target_rows, len(draft_tok)), draft_rows):  # head rows with no token: never proposable
        out.setdefault(row, None)
    return dict(sorted(out.items()))


def _mapping_finding(mapping: dict[int, int | None], target_rows: int, draft_rows: int, draft: Path) -> Finding:
    shown = ", ".join(f"{d}->{'none' if t is None else t}" for d, t in list(mapping.items())[:MAX_SHOWN])
    more = f" (+{len(mapping) - MAX_SHOWN} more in the JSON)" if len(mapping) > MAX_SHOWN else ""
    unmapped = sum(1 for t in mapping.values() if t is None)
    return warning(
        "draft-vocab-larger",
        f"the draft can propose {len(mapping)} ids the target reads differently or not at all (draft {draft_rows} "
        f"rows, target {target_rows}); draft->target mapping: {shown}{more}; {unmapped} have no target token",
        f"serve the draft with this draft-to-target id map and mask the {unmapped} unmapped ids in its logits, or "
        f"truncate the draft's embedding and head to the target's {target_rows} rows",
        file=f"{draft.name}/config.json",
    )


def _quote(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")
