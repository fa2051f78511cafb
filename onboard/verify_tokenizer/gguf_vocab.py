"""Reference tokenizers rebuilt from a GGUF vocabulary (llama.cpp's view of the tokenizer): `gpt2` vocabularies as
byte-level BPE with llama.cpp's pre-tokenizer regexes (`tokenizer.ggml.pre`), `llama` ones as score-based
SentencePiece BPE, `bert` ones as WordPiece (llama.cpp stores them in "phantom space" form).

The metadata is read as a struct stream with the format's definitions (value types, magic, key names) from the
`gguf` package, whose GGUFReader builds a numpy view per array item; tests/test_gguf_reader.py checks both agree.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from onboard.errors import InputError
from onboard.verify_tokenizer.bpe import SPACE, Encoder, merges_bpe, score_spm
from onboard.verify_tokenizer.patterns import patterns_for

_NUMPY_TO_STRUCT = {"uint8": "<B", "int8": "<b", "uint16": "<H", "int16": "<h", "uint32": "<I", "int32": "<i",
                    "float32": "<f", "bool": "<?", "uint64": "<Q", "int64": "<q", "float64": "<d"}  # fmt: skip


class _Stream:
    def __init__(self, fh: BinaryIO, name: str) -> None:
        from gguf import GGUF_MAGIC, GGUFReader, GGUFValueType  # imports numpy: only when a GGUF is read

        self.fh = fh
        self.name = name
        self.scalars = {int(t): _NUMPY_TO_STRUCT[np.__name__] for t, np in GGUFReader.gguf_scalar_to_np.items()}
        self.string_type, self.array_type = int(GGUFValueType.STRING), int(GGUFValueType.ARRAY)
        self.magic = struct.pack("<I", GGUF_MAGIC)

    def take(self, n: int) -> bytes:
        data = self.fh.read(n)
        if len(data) != n:
            raise InputError(f"{self.name}: GGUF metadata ends early (truncated file?)", "re-download the file")
        return data

    def unpack(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        return self.take(self.unpack("<Q")).decode("utf-8", errors="surrogateescape")

    def value(self, kind: int) -> Any:
        if kind in self.scalars:
            return self.unpack(self.scalars[kind])
        if kind == self.string_type:
            return self.string()
        if kind == self.array_type:
            item_kind, count = self.unpack("<I"), self.unpack("<Q")
            if item_kind == self.string_type:
                return [self.string() for _ in range(count)]
            if item_kind in self.scalars:
                fmt = self.scalars[item_kind]
                return list(struct.unpack(f"<{count}{fmt[1:]}", self.take(count * struct.calcsize(fmt))))
            return [self.value(item_kind) for _ in range(count)]
        raise InputError(f"{self.name}: unknown GGUF value type {kind}", "the file is corrupt or a newer GGUF version")


def read_gguf_metadata(path: Path) -> dict[str, Any]:
    """All key/value pairs of a GGUF file (never tensor data). InputError for files that are not GGUF v2/v3."""
    with path.open("rb") as fh:
        stream = _Stream(fh, path.name)
        if stream.take(4) != stream.magic:
            raise InputError(f"{path.name}: not a GGUF file (bad magic)", "remove it or replace it with a real GGUF")
        version = stream.unpack("<I")
        if version not in (2, 3):
            raise InputError(f"{path.name}: GGUF version {version} is not supported (2 and 3 are)", "convert it again")
        stream.unpack("<Q")  # tensor count: not needed
        kv_count = stream.unpack("<Q")
        out: dict[str, Any] = {}
        for _ in range(kv_count):
            key = stream.string()
            out[key] = stream.value(stream.unpack("<I"))
        return out


@dataclass(frozen=True)
class GgufVocab:
    model: str
    pre: str | None
    tokens: list[str]
    token_types: list[int]
    scores: list[float] | None
    merges: list[str] | None
    add_space_prefix: bool


def read_gguf_vocab(path: Path) -> GgufVocab:
    """The tokenizer.ggml.* keys. InputError when the file is not a readable vocabulary GGUF."""
    from gguf import Keys, TokenType

    fields = read_gguf_metadata(path)
    key = Keys.Tokenizer
    tokens = fields.get(key.LIST)
    if not tokens:
        raise InputError(f"{path.name}: GGUF file has no {key.LIST}", "it is not a vocabulary GGUF")
    return GgufVocab(
        model=fields.get(key.MODEL, ""),
        pre=fields.get(key.PRE),
        tokens=list(tokens),
        token_types=list(fields.get(key.TOKEN_TYPE, [int(TokenType.NORMAL)] * len(tokens))),
        scores=fields.get(key.SCORES),
        merges=fields.get(key.MERGES),
        add_space_prefix=bool(fields.get(key.ADD_PREFIX, True)),
    )


def gguf_encoder(vocab: GgufVocab) -> tuple[Encoder | None, str]:
    """An encode function for the vocabulary and what it is, or (None, reason) when its kind is not supported."""
    from gguf import TokenType

    # control and user-defined tokens are matched as whole strings in text (llama.cpp's tokenizer does the same)
    split_types = (int(TokenType.CONTROL), int(TokenType.USER_DEFINED))
    special = {t: i for i, (t, kind) in enumerate(zip(vocab.tokens, vocab.token_types)) if kind in split_types}
    if vocab.model == "gpt2":
        patterns = patterns_for(vocab.pre or "default")
        if patterns is None:
            return None, f"pre-tokenizer {vocab.pre!r} is not in our regex table"
        merges = [tuple(m.split(" ", 1)) for m in vocab.merges or []]
        encode = merges_bpe({t: i for i, t in enumerate(vocab.tokens)}, merges, patterns, special)
        return encode, f"byte-level BPE, pre-tokenizer {vocab.pre}"
    if vocab.model == "llama":
        if vocab.scores is None:
            return None, "llama vocabulary without tokenizer.ggml.scores"
        return score_spm(
            vocab.tokens, list(vocab.scores), special, vocab.add_space_prefix
        ), "SentencePiece BPE (scores)"
    if vocab.model == "bert":
        return _wordpiece(vocab), "WordPiece (phantom-space vocabulary)"
    return None, f"GGUF tokenizer model {vocab.model!r} is not supported"


def _wordpiece(vocab: GgufVocab) -> Encoder:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    # Undo llama.cpp's phantom-space form: "▁word" was a word start, a bare piece was a "##" continuation.
    def hf_piece(token: str) -> str:
        if token.startswith("[") and token.endswith("]"):
            return token
        return token[len(SPACE) :] if token.startswith(SPACE) else "##" + token

    wp_vocab = {hf_piece(t): i for i, t in enumerate(vocab.tokens)}
    unk = next((t for t in ("[UNK]", "<unk>") if t in wp_vocab), None)
    tok = Tokenizer(models.WordPiece(wp_vocab, unk_token=unk or "[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return lambda text: tok.encode(text, add_special_tokens=False).ids
