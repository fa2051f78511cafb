"""Reference tokenizers: every independent way a repo lets us tokenize, to compare the fast tokenizer against.

Loaders are a table (file pattern -> loader); a loader returns a `Reference`, or a `Skipped` saying why not.
"""

from __future__ import annotations

import ast
import base64
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from onboard.errors import InputError, panics_as_errors
from onboard.lfs import read_pointer
from onboard.verify_tokenizer.bpe import Encoder, encode_with_special, merges_bpe
from onboard.verify_tokenizer.patterns import (
    name_for_rank_count,
    name_for_tiktoken_file,
    name_for_tokenizer_class,
    normalization_for_tokenizer_class,
    patterns_for,
    patterns_from_tokenizer_json,
)


@dataclass(frozen=True)
class Reference:
    name: str
    """e.g. `sentencepiece(tokenizer.model)`; used in findings and goldens."""
    kind: str
    file: str
    encode: Encoder
    independent: bool = True
    """False when it reads the same configuration as the subject (raw tokenizer.json): agreement proves less."""
    note: str = ""


@dataclass(frozen=True)
class Skipped:
    kind: str
    file: str
    reason: str


@dataclass(frozen=True)
class RepoTokenizerInfo:
    """What the loaders need to know about the repo besides the file itself."""

    added_tokens: dict[str, int]
    """Every added token string -> id; HF splits text on these before the model sees it."""
    tokenizer_class: str | None
    pre_tokenizer: dict | None
    """tokenizer.json's pre_tokenizer section, when there is one."""
    normalizer: dict | None = None


def _pointer(path: Path, kind: str) -> Skipped | None:
    """A Git LFS pointer is skipped here; verify-tokenizer reports the pointer itself as `lfs-pointer`."""
    return Skipped(kind, path.name, "the file is a Git LFS pointer") if read_pointer(path) is not None else None


def load_tokenizer_json(path: Path, info: RepoTokenizerInfo) -> Reference:
    from tokenizers import Tokenizer

    try:
        with panics_as_errors():
            tok = Tokenizer.from_file(str(path))
    except Exception as exc:
        raise InputError(
            f"{path.name}: cannot be loaded by the tokenizers library ({exc})",
            "the file is corrupt or truncated: re-download it, or regenerate it with save_pretrained()",
        ) from exc
    return Reference(
        name="tokenizers(tokenizer.json)",
        kind="tokenizer.json",
        file=path.name,
        encode=lambda text: tok.encode(text, add_special_tokens=False).ids,
        independent=False,
        note="the raw tokenizer.json as the tokenizers library reads it, without transformers' rebuild",
    )


def load_sentencepiece(path: Path, info: RepoTokenizerInfo) -> Reference | Skipped:
    if skipped := _pointer(path, "sentencepiece"):
        return skipped
    import sentencepiece as spm

    proc = spm.SentencePieceProcessor()
    try:
        proc.LoadFromSerializedProto(path.read_bytes())
    except Exception as exc:
        raise InputError(
            f"{path.name}: not a readable SentencePiece model ({exc})",
            "re-download the file; a truncated tokenizer.model cannot be used",
        ) from exc
    unk = proc.id_to_piece(proc.unk_id()) if proc.unk_id() >= 0 else "<unk>"
    encode = _without_prefix_after_special(proc.encode, unk, info.added_tokens)
    return Reference("sentencepiece(" + path.name + ")", "sentencepiece", path.name, encode)


def _without_prefix_after_special(encode: Encoder, unk: str, added: dict[str, int]) -> Encoder:
    """SentencePiece's `encode` adds a dummy prefix; after a special token the original pipeline adds none
    (transformers' legacy=False): prefixing the unk piece and dropping its ids is how transformers' slow tokenizer
    does it."""

    def encode_segment(text: str, first: bool) -> list[int]:
        return encode(text) if first else encode(unk + text)[len(encode(unk)) :]

    return lambda text: encode_with_special(text, added, encode_segment)


def read_tiktoken_ranks(path: Path) -> dict[bytes, int] | None:
    """Parse `base64 rank` lines; None when the file is not in that format."""
    ranks: dict[bytes, int] = {}
    try:
        for line in path.read_text(encoding="ascii").splitlines():
            if not line:
                continue
            token, rank = line.split(" ")
            ranks[base64.b64decode(token, validate=True)] = int(rank)
    except (UnicodeDecodeError, ValueError):
        return None
    return ranks or None


def load_tiktoken(path: Path, info: RepoTokenizerInfo) -> Reference | Skipped:
    if skipped := _pointer(path, "tiktoken"):
        return skipped
    ranks = read_tiktoken_ranks(path)
    if ranks is None:
        return Skipped("tiktoken", path.name, "not a tiktoken rank file")
    family = name_for_tiktoken_file(path.name) or name_for_rank_count(len(ranks))
    patterns = patterns_for(family) if family else None
    independent, how = True, f"{family} regex"
    if patterns is None and (spelled := pattern_in_code(path.parent)) is not None:
        # The repository's tokenizer code spells its regex: read as text, never run. Shared with the subject.
        (code_file, pattern), independent = spelled, False
        patterns, how = (pattern,), f"regex read (not run) from {code_file}"
    if patterns is None or len(patterns) != 1:
        return Skipped("tiktoken", path.name, f"no known pre-tokenizer regex for {len(ranks)} ranks")
    import tiktoken

    # Added tokens below the rank count (rare) are not special in tiktoken; HF would split on them.
    special = {s: i for s, i in info.added_tokens.items() if i >= len(ranks)}
    enc = tiktoken.Encoding(path.name, pat_str=patterns[0], mergeable_ranks=ranks, special_tokens=special)
    return Reference(
        f"tiktoken({path.name})",
        "tiktoken",
        path.name,
        lambda text: enc.encode(text, allowed_special="all"),
        independent,
        note=f"tiktoken library, {how}",
    )


def pattern_in_code(root: Path) -> tuple[str, str] | None:
    """(file, regex) of the first `pat_str = …` a tokenization_*.py in `root` spells as a string literal or as
    `"|".join([literals])` (tiktoken-based repository tokenizers: Kimi-K2, Qwen's first release); parsed with ast,
    nothing runs. None when no file spells one."""
    for path in sorted(root.glob("tokenization_*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, value = [node.target], node.value
            else:
                continue
            if any(isinstance(t, ast.Name) and t.id.lower() == "pat_str" for t in targets):
                pattern = _literal_pattern(value)
                if pattern is not None:
                    return path.name, pattern
    return None


def _literal_pattern(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    joined = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join"
    if joined and isinstance(node.func.value, ast.Constant) and len(node.args) == 1:
        parts = node.args[0]
        if isinstance(parts, (ast.List, ast.Tuple)):
            texts = [_literal_pattern(e) for e in parts.elts]
            if all(t is not None for t in texts):
                return str(node.func.value.value).join(t for t in texts if t is not None)
    return None


def load_vocab_merges(path: Path, info: RepoTokenizerInfo) -> Reference | Skipped:
    merges_path = path.with_name("merges.txt")
    if not merges_path.is_file():
        return Skipped("vocab+merges", path.name, "vocab.json without merges.txt")
    if read_pointer(path) is not None or read_pointer(merges_path) is not None:
        return Skipped("vocab+merges", path.name, "vocab.json or merges.txt is a Git LFS pointer")
    try:
        vocab = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path.name}: malformed JSON ({exc})", "re-download vocab.json") from exc
    merges = []
    for line in merges_path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#version") or not line.strip():
            continue
        parts = line.split(" ")
        if len(parts) != 2:
            raise InputError(
                f"merges.txt: malformed line {line!r}", "each line must be two tokens separated by a space"
            )
        merges.append((parts[0], parts[1]))
    family = name_for_tokenizer_class(info.tokenizer_class)
    patterns, independent = (patterns_for(family), True) if family else (None, True)
    if patterns is None:
        patterns, independent = patterns_from_tokenizer_json(info.pre_tokenizer), False
    if patterns is None:
        return Skipped("vocab+merges", path.name, f"unknown pre-tokenizer for tokenizer class {info.tokenizer_class!r}")
    normalization = normalization_for_tokenizer_class(info.tokenizer_class) if independent else None
    if not independent and (info.normalizer or {}).get("type") == "NFC":
        normalization = "NFC"
    encode = merges_bpe(vocab, merges, patterns, info.added_tokens, normalization=normalization)
    note = f"pure-Python byte-level BPE, {family or 'tokenizer.json'} pre-tokenizer"
    return Reference("bpe(vocab.json+merges.txt)", "vocab+merges", path.name, encode, independent, note)


def load_mistral_common(path: Path, info: RepoTokenizerInfo) -> Reference | Skipped:
    if skipped := _pointer(path, "mistral-common"):
        return skipped
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    try:
        raw = MistralTokenizer.from_file(str(path)).instruct_tokenizer.tokenizer
    except Exception as exc:
        raise InputError(f"{path.name}: mistral-common cannot load it ({exc})", "re-download the file") from exc
    # SentencePiece-based versions (v1-v3): after a control token mid-string mistral-common's chat encoding has no
    # dummy prefix either. Tekken adds no prefix at all.
    spm = hasattr(raw, "_model") and hasattr(raw._model, "encode_as_ids")

    def plain(text: str) -> list[int]:
        return raw.encode(text, bos=False, eos=False)

    if spm:
        encode = _without_prefix_after_special(plain, raw.id_to_piece(raw.unk_id), info.added_tokens)
    else:
        encode = lambda text: encode_with_special(text, info.added_tokens, lambda t, first: plain(t))  # noqa: E731
    kind = "SentencePiece" if spm else "tekken"
    return Reference(f"mistral-common({path.name})", "mistral-common", path.name, encode, note=f"mistral-common {kind}")


def load_gguf(path: Path, info: RepoTokenizerInfo) -> Reference | Skipped:
    if skipped := _pointer(path, "gguf"):
        return skipped
    from onboard.verify_tokenizer.gguf_vocab import gguf_encoder, read_gguf_vocab

    encode, why = gguf_encoder(read_gguf_vocab(path))
    if encode is None:
        return Skipped("gguf", path.name, why)
    return Reference(f"gguf({path.name})", "gguf", path.name, encode, note=why)


def load_tokenizer_model(path: Path, info: RepoTokenizerInfo) -> Reference | Skipped:
    """`tokenizer.model` is SentencePiece in most repos but tiktoken ranks in Llama 3 / Kimi style ones."""
    if read_pointer(path) is None and read_tiktoken_ranks(path) is not None:
        return load_tiktoken(path, info)
    return load_sentencepiece(path, info)


# (glob relative to the repo root, loader). Order = order in the report.
Loader = Callable[[Path, RepoTokenizerInfo], Reference | Skipped]
LOADERS: tuple[tuple[str, Loader], ...] = (
    ("tokenizer.json", load_tokenizer_json),
    ("tokenizer.model", load_tokenizer_model),
    ("original/tokenizer.model", load_tiktoken),
    ("*.tiktoken", load_tiktoken),
    ("tiktoken.model", load_tiktoken),  # Kimi-K2's name
    ("vocab.json", load_vocab_merges),
    ("tekken.json", load_mistral_common),
    ("*.model.v[0-9]*", load_mistral_common),
    ("*.gguf", load_gguf),
)


def discover_references(
    root: Path, info: RepoTokenizerInfo, loaders: Sequence[tuple[str, Loader]] = ()
) -> tuple[list[Reference], list[Skipped]]:
    """Every reference the files under `root` allow (to `loaders`, by default all of LOADERS). Corrupt files raise
    InputError (exit 2)."""
    found: list[Reference] = []
    skipped: list[Skipped] = []
    seen: set[Path] = set()
    for pattern, loader in loaders or LOADERS:
        for path in sorted(root.glob(pattern)):
            if path in seen or not path.is_file():
                continue
            seen.add(path)
            result = loader(path, info)
            (found if isinstance(result, Reference) else skipped).append(result)
    return found, skipped


def no_code_references(root: Path) -> list[Reference]:
    """Our own loaders for a tokenizer that exists only as repository code (a tiktoken rank file beside a
    tokenization_*.py): what onboard can tokenize with without running that code. Special tokens come from
    tokenizer_config.json's added_tokens_decoder (read, not run)."""
    try:
        config = json.loads((root / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        config = {}
    decoder = config.get("added_tokens_decoder") if isinstance(config, dict) else None
    added = {
        str(v["content"]): int(k)
        for k, v in (decoder or {}).items()
        if isinstance(v, dict) and isinstance(v.get("content"), str) and str(k).isdigit()
    }
    info = RepoTokenizerInfo(added, config.get("tokenizer_class") if isinstance(config, dict) else None, None)
    tiktoken_files = tuple((glob, loader) for glob, loader in LOADERS if loader is load_tiktoken)
    found, _ = discover_references(root, info, [*tiktoken_files, ("tokenizer.model", load_tokenizer_model)])
    return [r for r in found if r.kind == "tiktoken"]
