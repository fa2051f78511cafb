"""Independent pure-Python byte-level BPE: the reference we compare the fast tokenizer against.

Two merge rules cover the formats repos ship: GPT-2 style `merges.txt` (merge the pair with the lowest merge index)
and tiktoken style ranks (merge the adjacent pair whose concatenation has the lowest rank). Pre-tokenization is a
sequence of regexes applied like llama.cpp's `unicode_regex_split` and HF's `Split(behavior="Isolated")`: every
regex splits every fragment into its matches and the gaps between them, all kept.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterable
from functools import lru_cache

import regex


@lru_cache(maxsize=1)
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map (the alphabet of byte-level vocabularies)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


def compile_patterns(patterns: Iterable[str]) -> tuple[regex.Pattern, ...]:
    return tuple(regex.compile(p) for p in patterns)


def split_pieces(text: str, patterns: tuple[regex.Pattern, ...]) -> list[str]:
    """Apply each regex in turn; keep matches and the text between them as separate pieces."""
    pieces = [text] if text else []
    for pattern in patterns:
        out: list[str] = []
        for piece in pieces:
            pos = 0
            for m in pattern.finditer(piece):
                if m.start() == m.end():
                    continue
                if m.start() > pos:
                    out.append(piece[pos : m.start()])
                out.append(m.group())
                pos = m.end()
            if pos < len(piece):
                out.append(piece[pos:])
        pieces = out
    return pieces


def split_special(text: str, special: dict[str, int]) -> list[tuple[str, int | None]]:
    """Cut `text` on added/special token strings (longest first). Returns (segment, id or None for plain text)."""
    if not special:
        return [(text, None)] if text else []
    alternation = regex.compile("|".join(regex.escape(s) for s in sorted(special, key=len, reverse=True)))
    out: list[tuple[str, int | None]] = []
    pos = 0
    for m in alternation.finditer(text):
        if m.start() > pos:
            out.append((text[pos : m.start()], None))
        out.append((m.group(), special[m.group()]))
        pos = m.end()
    if pos < len(text):
        out.append((text[pos:], None))
    return out


def encode_with_special(
    text: str, special: dict[str, int], encode_plain: Callable[[str, bool], list[int]]
) -> list[int]:
    """Ids of `text`: each special/added token string its own id, the text between them through
    `encode_plain(segment, at_start)`; `at_start` is True only for a segment that begins `text` (SentencePiece adds
    its dummy prefix there and not after a special token)."""
    ids: list[int] = []
    for index, (segment, special_id) in enumerate(split_special(text, special)):
        if special_id is not None:
            ids.append(special_id)
        else:
            ids.extend(encode_plain(segment, index == 0))
    return ids


class MergesBPE:
    """Byte-level BPE from a `vocab.json` + `merges.txt` pair (GPT-2, Qwen, Falcon, GGUF `gpt2` vocabularies)."""

    def __init__(
        self,
        vocab: dict[str, int],
        merges: list[tuple[str, str]],
        patterns: Iterable[str],
        special: dict[str, int] | None = None,
        ignore_merges: bool = False,
        normalization: str | None = None,
    ) -> None:
        self.vocab = vocab
        self.normalization = normalization
        self.ranks = {pair: i for i, pair in enumerate(merges)}
        self.patterns = compile_patterns(patterns)
        self.special = dict(special or {})
        self.ignore_merges = ignore_merges
        self._byte_map = bytes_to_unicode()
        self._bpe = lru_cache(maxsize=1 << 16)(self._bpe_uncached)

    def _bpe_uncached(self, word: str) -> tuple[str, ...]:
        if self.ignore_merges and word in self.vocab:
            return (word,)
        parts = list(word)
        while len(parts) > 1:
            best_rank, best_i = None, -1
            for i in range(len(parts) - 1):
                rank = self.ranks.get((parts[i], parts[i + 1]))
                if rank is not None and (best_rank is None or rank < best_rank):
                    best_rank, best_i = rank, i
            if best_rank is None:
                break
            parts[best_i : best_i + 2] = [parts[best_i] + parts[best_i + 1]]
        return tuple(parts)

    def encode(self, text: str) -> list[int]:
        return encode_with_special(text, self.special, self._encode_plain)

    def _encode_plain(self, segment: str, at_start: bool) -> list[int]:
        """`at_start` plays no part: byte-level BPE adds no prefix."""
        if self.normalization:
            segment = unicodedata.normalize(self.normalization, segment)
        ids: list[int] = []
        for piece in split_pieces(segment, self.patterns):
            word = "".join(self._byte_map[b] for b in piece.encode("utf-8"))
            ids.extend(self.vocab[token] for token in self._bpe(word))
        return ids


class RankBPE:
    """tiktoken-style BPE over raw bytes: merge the adjacent pair whose concatenation has the lowest rank."""

    def __init__(self, ranks: dict[bytes, int], patterns: Iterable[str], special: dict[str, int] | None = None) -> None:
        self.ranks = ranks
        self.patterns = compile_patterns(patterns)
        self.special = dict(special or {})
        self._bpe = lru_cache(maxsize=1 << 16)(self._bpe_uncached)

    def _bpe_uncached(self, piece: bytes) -> tuple[int, ...]:
        if piece in self.ranks:
            return (self.ranks[piece],)
        parts = [piece[i : i + 1] for i in range(len(piece))]
        while len(parts) > 1:
            best_rank, best_i = None, -1
            for i in range(len(parts) - 1):
                rank = self.ranks.get(parts[i] + parts[i + 1])
                if rank is not None and (best_rank is None or rank < best_rank):
                    best_rank, best_i = rank, i
            if best_rank is None:
                break
            parts[best_i : best_i + 2] = [parts[best_i] + parts[best_i + 1]]
        return tuple(self.ranks[p] for p in parts)

    def encode(self, text: str) -> list[int]:
        return encode_with_special(text, self.special, self._encode_plain)

    def _encode_plain(self, segment: str, at_start: bool) -> list[int]:
        """`at_start` plays no part: byte-level BPE adds no prefix."""
        return [i for piece in split_pieces(segment, self.patterns) for i in self._bpe(piece.encode("utf-8"))]


Encoder = Callable[[str], list[int]]
