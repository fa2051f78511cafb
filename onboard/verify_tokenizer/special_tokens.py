"""BOS/EOS/PAD/UNK across config.json, generation_config.json, tokenizer_config.json, special_tokens_map.json and the
tokenizer itself; the stop set; insertion vs the add_bos/add_eos flags; vocabulary size vs embedding rows."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from onboard.findings import Finding, error, info, warning
from onboard.lfs import LfsPointerError
from onboard.verify_tokenizer.conversations import check_template
from onboard.verify_tokenizer.repo import TokenizerRepo, open_tokenizer_repo
from onboard.verify_tokenizer.subject import NoVocabulary, Subject, open_subject
from onboard.verify_tokenizer.template_lookup import default_template

ROLES = ("bos", "eos", "pad", "unk")
CONTROL_SHAPE = re.compile(r"^<\|[^|<>]+\|>$|^<｜[^｜]+｜>$")
"""`<|eot_id|>`, `<｜end▁of▁sentence｜>`: tokens of this shape are control tokens in every family we know."""


@dataclass(frozen=True)
class SpecialTokens:
    declared: dict[str, dict[str, list[int]]]
    """file -> role -> ids that file declares (text names resolved through the tokenizer), ids no token has
    included (the stop set leaves those out: `in_range`)."""
    tokenizer: dict[str, int | None]
    """role -> id the loaded tokenizer uses."""
    add_bos_token: bool | None
    add_eos_token: bool | None
    inserts_bos: bool
    inserts_eos: bool
    stop_ids: list[int] = field(default_factory=list)
    stop_tokens: list[str] = field(default_factory=list)
    tokenizer_length: int = 0
    embedding_rows: int | None = None


def _ids(value: Any, subject: Subject | None) -> list[int]:
    """An id, a list of ids, a token string or an AddedToken dict -> ids (strings only with a tokenizer)."""
    if value is None or isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [value]
    if isinstance(value, list):
        return [i for v in value for i in _ids(v, subject)]
    if isinstance(value, dict):
        value = value.get("content")
    if isinstance(value, str) and subject is not None:
        found = subject.token_id(value)
        return [found] if found is not None else []
    return []


def declared_tokens(repo: TokenizerRepo, subject: Subject | None) -> dict[str, dict[str, list[int]]]:
    out: dict[str, dict[str, list[int]]] = {}
    for file, suffix in (
        ("config.json", "_token_id"),
        ("generation_config.json", "_token_id"),
        ("tokenizer_config.json", "_token"),
        ("special_tokens_map.json", "_token"),
    ):
        doc = repo.json(file)
        if doc is None:
            continue
        if file == "config.json" and isinstance(doc.get("text_config"), dict):
            doc = {**doc["text_config"], **{k: v for k, v in doc.items() if v is not None}}
        roles = {role: _ids(doc.get(role + suffix), subject) for role in ROLES if doc.get(role + suffix) is not None}
        if roles:
            out[file] = roles
    return out


MAX_TOKEN_ID = 2**31 - 1
"""Ids above this fit no engine's token type (llama.cpp's llama_token, vLLM's int32 token ids) whatever the vocabulary."""


def in_range(declared: dict[str, dict[str, list[int]]], size: int | None) -> dict[str, dict[str, list[int]]]:
    """`declared` without the ids no token can have: negative, at least `size` (the tokenizer's length, when known),
    or above MAX_TOKEN_ID. They can never be generated, so they stop nothing; analyse() reports them."""
    limit = MAX_TOKEN_ID + 1 if size is None else min(size, MAX_TOKEN_ID + 1)
    return {
        file: {role: [i for i in ids if 0 <= i < limit] for role, ids in roles.items()}
        for file, roles in declared.items()
    }


def declared_stop_ids(
    declared: dict[str, dict[str, list[int]]], tokenizer_eos: int | None, end_of_turn: list[int]
) -> list[int]:
    """THE stop set (verify-tokenizer reports it, goldens record it, validate tests candidates against it): every EOS
    id config.json or generation_config.json declares, the tokenizer's EOS, and the token(s) the chat template ends
    assistant turns with (Llama 3's <|eot_id|>)."""
    files = [i for file in ("generation_config.json", "config.json") for i in declared.get(file, {}).get("eos", [])]
    return sorted({*files, *([tokenizer_eos] if tokenizer_eos is not None else []), *end_of_turn})


def engine_stop_ids(declared: dict[str, dict[str, list[int]]], tokenizer_eos: int | None) -> list[int]:
    """The part of the stop set a serving engine honours after loading the files: generation_config.json's
    eos_token_id (else config.json's) and the tokenizer's EOS; an end-of-turn token the files do not declare is not
    among them (the bug validate's stop_set check catches)."""
    files = declared.get("generation_config.json", {}).get("eos") or declared.get("config.json", {}).get("eos", [])
    return sorted({*files, *([tokenizer_eos] if tokenizer_eos is not None else [])})


def checkpoint_stop_set(folder: Path, *, engine: bool = False) -> list[int]:
    """`declared_stop_ids` (with `engine`, `engine_stop_ids`) of a local checkpoint folder, computed as verify-tokenizer
    computes them. Without tokenizer files: the ids config.json and generation_config.json declare."""
    repo = open_tokenizer_repo(str(folder))
    has_tokenizer = any((folder / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json", "vocab.json"))
    try:  # a tokenizer transformers would have to invent (no vocabulary) declares nothing: files only
        subject = open_subject(repo) if has_tokenizer else None
    except (NoVocabulary, LfsPointerError):
        subject = None
    declared = in_range(declared_tokens(repo, subject), len(subject) if subject is not None else None)
    eos = subject.hf.eos_token_id if subject is not None else None
    if engine:
        return engine_stop_ids(declared, eos)
    template, file = default_template(repo) if subject is not None else (None, None)
    end_of_turn = check_template(template, file, subject)[0].end_of_turn if template is not None else []
    return declared_stop_ids(declared, eos, end_of_turn)


def analyse(
    repo: TokenizerRepo,
    subject: Subject,
    end_of_turn: list[int],
    embedding_rows: int | None,
    template: str | None = None,
) -> tuple[SpecialTokens, list[Finding]]:
    findings: list[Finding] = []
    size = len(subject)
    as_declared = declared_tokens(repo, subject)
    declared = in_range(as_declared, size)
    for file, roles in as_declared.items():
        for role, ids in roles.items():
            bad = [i for i in ids if i not in declared[file][role]]
            if bad:  # an EOS that is no token leaves the stop set short (error); a pad of -1 is an old "none"
                eos = role == "eos"
                findings.append(
                    (error if eos else warning)(
                        f"{role}-id-out-of-range",
                        f"{file} {role}_token_id declares {bad[0]}, which no token of this {size}-token tokenizer has"
                        + (": it is never generated, so it stops nothing (left out of the stop set)" if eos else ""),
                        f"set {role}_token_id in {file} to the id of the {role.upper()} token (0 to {size - 1})"
                        + ("" if eos else ", or remove it"),
                        file=file,
                    )
                )
    hf = subject.hf
    tokenizer = {role: getattr(hf, f"{role}_token_id", None) for role in ROLES}
    tok_config = repo.json("tokenizer_config.json") or {}
    add_bos, add_eos = tok_config.get("add_bos_token"), tok_config.get("add_eos_token")
    inserts_bos, inserts_eos = subject.observed_insertion()

    gen_eos = declared.get("generation_config.json", {}).get("eos", [])
    cfg_eos = declared.get("config.json", {}).get("eos", [])
    tok_eos = tokenizer["eos"]
    if gen_eos and tok_eos is not None and tok_eos not in gen_eos:
        findings.append(
            error(
                "eos-mismatch",
                f"generation_config.json eos_token_id {gen_eos} does not include the tokenizer's EOS "
                f"{_show(subject, tok_eos)}: engines that read one file stop on a token the other never emits",
                "list every end-of-sequence / end-of-turn id in generation_config.json eos_token_id",
                file="generation_config.json",
            )
        )
    if cfg_eos and gen_eos and set(cfg_eos) != set(gen_eos):
        findings.append(
            warning(
                "eos-config-disagreement",
                f"config.json eos_token_id {cfg_eos} differs from generation_config.json {gen_eos}",
                "make them agree (generation_config.json wins in transformers and vLLM)",
                file="config.json",
            )
        )
    for role in ("bos", "pad", "unk"):
        seen = {file: ids for file, roles in declared.items() for r, ids in roles.items() if r == role and ids}
        distinct = {tuple(sorted(ids)) for ids in seen.values()}
        if len(distinct) > 1:
            findings.append(
                warning(
                    f"{role}-disagreement",
                    f"{role.upper()} differs across files: {seen}",
                    f"declare the same {role} token everywhere",
                    file=next(iter(seen)),
                )
            )

    stops = declared_stop_ids(declared, tok_eos, end_of_turn)
    missing_eot = [i for i in end_of_turn if i not in engine_stop_ids(declared, tok_eos)]
    if missing_eot:
        findings.append(
            error(
                "end-of-turn-not-stop",
                f"the chat template ends assistant turns with {[_show(subject, i) for i in missing_eot]}, which is neither "
                "the tokenizer's EOS nor in generation_config.json eos_token_id: generation will not stop (Llama 3 <|eot_id|>)",
                "add the id to generation_config.json eos_token_id",
                file="generation_config.json",
            )
        )
    pad = tokenizer["pad"]
    if pad is not None and pad in stops:
        findings.append(
            warning(
                "pad-equals-eos",
                f"the pad token {_show(subject, pad)} is also a stop token: training collators that mask padding also "
                "mask EOS and the model never learns to stop",
                "use a dedicated pad token (e.g. an unused reserved token)",
                file="tokenizer_config.json",
            )
        )
    for flag, inserts, role in ((add_bos, inserts_bos, "bos"), (add_eos, inserts_eos, "eos")):
        if flag is not None and bool(flag) != inserts:
            findings.append(
                error(
                    f"{role}-flag-contradiction",
                    f"tokenizer_config.json add_{role}_token={flag} but encode(add_special_tokens=True) "
                    f"{'inserts' if inserts else 'does not insert'} {role.upper()}",
                    "the post_processor in tokenizer.json overrides the flag for fast tokenizers: make them agree",
                    file="tokenizer_config.json",
                )
            )
    for role, token_id in tokenizer.items():
        if token_id is not None and token_id >= size:
            findings.append(
                error(
                    f"{role}-out-of-range",
                    f"{role.upper()} id {token_id} >= tokenizer length {size}",
                    "fix the id",
                    file="tokenizer_config.json",
                )
            )
    if embedding_rows is not None:
        if size > embedding_rows:
            findings.append(
                error(
                    "tokenizer-exceeds-embedding",
                    f"the tokenizer has {size} tokens but the embedding has {embedding_rows} rows: ids >= {embedding_rows} "
                    "index out of range",
                    "resize the embeddings (and lm_head) or drop the extra added tokens",
                    file="config.json",
                )
            )
        elif embedding_rows > size:
            findings.append(
                info(
                    "embedding-padded",
                    f"embedding has {embedding_rows} rows for {size} tokens "
                    f"({embedding_rows - size} padding rows that must never be sampled)",
                )
            )
    findings += _not_special(repo, subject, stops, template or "")
    stop_tokens = [_show(subject, i) for i in stops]
    findings.append(info("stop-set", f"stop set: {', '.join(stop_tokens) or 'empty'}"))
    tokens = SpecialTokens(
        as_declared, tokenizer, add_bos, add_eos, inserts_bos, inserts_eos, stops, stop_tokens, size, embedding_rows
    )
    return tokens, findings


def _not_special(repo: TokenizerRepo, subject: Subject, stop_ids: list[int], template: str) -> list[Finding]:
    """Added tokens that act as control tokens but are marked special=false in the repo's files.

    Read from the files, not the loaded tokenizer: transformers re-marks its own bos/eos as special, but llama.cpp
    and other engines take the flag from tokenizer.json. Control = declared special / in the stop set, or
    `<|…|>`-shaped and written by the chat template. Qwen's `<think>` (template-emitted, not control-shaped) and
    `<|fim_*|>` (control-shaped, not in the template) are special=false on purpose and are not flagged.
    """
    hf = subject.hf
    control = {t for t in (hf.special_tokens_map or {}).values() if isinstance(t, str)}
    control |= {str(hf.convert_ids_to_tokens(i)) for i in stop_ids}
    entries: list[tuple[str, int | None, str]] = []
    for item in (repo.json("tokenizer.json") or {}).get("added_tokens") or []:
        if isinstance(item, dict) and item.get("special") is False:
            entries.append((str(item.get("content")), item.get("id"), "tokenizer.json"))
    for key, item in ((repo.json("tokenizer_config.json") or {}).get("added_tokens_decoder") or {}).items():
        if isinstance(item, dict) and item.get("special") is False:
            entries.append(
                (str(item.get("content")), int(key) if str(key).isdigit() else None, "tokenizer_config.json")
            )
    out: list[Finding] = []
    for text, token_id, file in entries:
        if text in control or (CONTROL_SHAPE.match(text) and text in template):
            out.append(
                warning(
                    "special-token-not-special",
                    f"added token {text!r} (id {token_id}) is used as a control token but {file} marks it special=false: "
                    "skip_special_tokens leaves it in output and engines match it inside normal text",
                    f'set "special": true for it in {file}',
                    file=file,
                )
            )
    return out


def _show(subject: Subject, token_id: int) -> str:
    try:
        return f"{subject.hf.convert_ids_to_tokens(token_id)} ({token_id})"
    except Exception:  # out-of-range ids are reported by their own finding
        return f"<id {token_id}>"
