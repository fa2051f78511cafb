"""Reference tokenizers rebuilt from a GGUF vocabulary (llama.cpp's view of the tokenizer).

`gpt2` vocabularies become byte-level BPE with llama.cpp's pre-tokenizer regexes (`tokenizer.ggml.pre`), `llama`
ones the score-based SentencePiece BPE, `bert` ones a WordPiece (llama.cpp stores them in "phantom space" form).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from onboard.errors import InputError
from onboard.verify_tokenizer.bpe import Encoder, MergesBPE
from onboard.verify_tokenizer.gguf_reader import read_gguf_metadata
from onboard.verify_tokenizer.patterns import patterns_for
from onboard.verify_tokenizer.spm import SPACE, ScoreSPM


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
    """Read the tokenizer.ggml.* keys (names from gguf.Keys). Raises InputError when the file is not a readable GGUF."""
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
    """An encode function for the vocabulary, or (None, reason) when its kind is not supported here."""
    from gguf import TokenType

    # control and user-defined tokens are matched as whole strings in text (llama.cpp's tokenizer does the same)
    split_types = (int(TokenType.CONTROL), int(TokenType.USER_DEFINED))
    special = {t: i for i, (t, kind) in enumerate(zip(vocab.tokens, vocab.token_types)) if kind in split_types}
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
