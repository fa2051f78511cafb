"""Reference tokenizers rebuilt from a GGUF vocabulary (llama.cpp's view of the tokenizer).

`gpt2` vocabularies become byte-level BPE with llama.cpp's pre-tokenizer regexes (`tokenizer.ggml.pre`), `llama`
ones the score-based SentencePiece BPE, `bert` ones a WordPiece (llama.cpp stores them in "phantom space" form).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onboard.errors import InputError
from onboard.verify_tokenizer.bpe import Encoder, MergesBPE
from onboard.verify_tokenizer.gguf_reader import read_gguf_metadata
from onboard.verify_tokenizer.patterns import patterns_for
from onboard.verify_tokenizer.spm import SPACE, ScoreSPM

# llama.cpp token types (llama_token_type): 3 control, 4 user-defined: these are matched as whole strings in text.
_SPLIT_TYPES = (3, 4)


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
    """Read the tokenizer.ggml.* keys. Raises InputError when the file is not a readable GGUF."""
    fields = read_gguf_metadata(path)

    def value(key: str, default: Any = None) -> Any:
        return fields.get(key, default)

    tokens = value("tokenizer.ggml.tokens")
    if not tokens:
        raise InputError(f"{path.name}: GGUF file has no tokenizer.ggml.tokens", "it is not a vocabulary GGUF")
    return GgufVocab(
        model=value("tokenizer.ggml.model", ""),
        pre=value("tokenizer.ggml.pre"),
        tokens=list(tokens),
        token_types=list(value("tokenizer.ggml.token_type", [1] * len(tokens))),
        scores=value("tokenizer.ggml.scores"),
        merges=value("tokenizer.ggml.merges"),
        add_space_prefix=bool(value("tokenizer.ggml.add_space_prefix", True)),
    )


def gguf_encoder(vocab: GgufVocab) -> tuple[Encoder | None, str]:
    """An encode function for the vocabulary, or (None, reason) when its kind is not supported here."""
    special = {t: i for i, (t, kind) in enumerate(zip(vocab.tokens, vocab.token_types)) if kind in _SPLIT_TYPES}
    if vocab.model == "gpt2":
        patterns = patterns_for(vocab.pre or "default")
        if patterns is None:
            return None, f"pre-tokenizer {vocab.pre!r} is not in our regex table"
        merges = [tuple(m.split(" ", 1)) for m in vocab.merges or []]
        bpe = MergesBPE({t: i for i, t in enumerate(vocab.tokens)}, merges, patterns, special)
        return bpe.encode, f"byte-level BPE, pre-tokenizer {vocab.pre}"
    if vocab.model == "llama":
        if vocab.scores is None:
            return None, "llama vocabulary without tokenizer.ggml.scores"
        spm = ScoreSPM(vocab.tokens, list(vocab.scores), special, vocab.add_space_prefix)
        return spm.encode, "SentencePiece BPE (scores)"
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
