"""Independent pure-Python reference encoders, each an `Encoder` (text -> ids):

- byte-level BPE from GPT-2 style merges (the pair with the lowest merge index), pre-tokenized like llama.cpp's
  `unicode_regex_split` and HF's `Split(behavior="Isolated")`: each regex splits every fragment into its matches and
  the gaps between them, all kept;
- llama.cpp's score-based SentencePiece BPE (`llm_tokenizer_spm`), for GGUF `llama` vocabularies.
"""

from __future__ import annotations

import heapq
import unicodedata
from collections.abc import Callable, Iterable
from functools import lru_cache

import regex

Encoder = Callable[[str], list[int]]
SPACE = "\u2581"
"""SentencePiece's space."""


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


def encode_with_special(
    text: str, special: dict[str, int], encode_plain: Callable[[str, bool], list[int]]
) -> list[int]:
    """Ids of `text`: each special/added token string (longest first) its own id, the text between them through
    `encode_plain(segment, at_start)`; `at_start` is True only for a segment that begins `text` (SentencePiece adds
    its dummy prefix there and not after a special token)."""
    if not special:
        return encode_plain(text, True) if text else []
    alternation = regex.compile("|".join(regex.escape(s) for s in sorted(special, key=len, reverse=True)))
    ids: list[int] = []
    pos = 0
    for m in alternation.finditer(text):
        if m.start() > pos:
            ids.extend(encode_plain(text[pos : m.start()], pos == 0))
        ids.append(special[m.group()])
        pos = m.end()
    if pos < len(text):
        ids.extend(encode_plain(text[pos:], pos == 0))
    return ids


def merges_bpe(
    vocab: dict[str, int],
    merges: list[tuple[str, str]],
    patterns: Iterable[str],
    special: dict[str, int] | None = None,
    normalization: str | None = None,
) -> Encoder:
    """Byte-level BPE from a `vocab.json` + `merges.txt` pair (GPT-2, Qwen, Falcon, GGUF `gpt2` vocabularies);
    `normalization`: the Unicode form applied first (Qwen2Tokenizer: NFC)."""
    ranks = {pair: i for i, pair in enumerate(merges)}
    compiled = tuple(regex.compile(p) for p in patterns)
    byte_map = bytes_to_unicode()

    @lru_cache(maxsize=1 << 16)
    def bpe(word: str) -> tuple[str, ...]:
        parts = list(word)
        while len(parts) > 1:  # merge the adjacent pair of lowest rank (leftmost on ties)
            ranked = [(r, i) for i in range(len(parts) - 1) if (r := ranks.get((parts[i], parts[i + 1]))) is not None]
            if not ranked:
                break
            _, i = min(ranked)
            parts[i : i + 2] = [parts[i] + parts[i + 1]]
        return tuple(parts)

    def encode_plain(segment: str, at_start: bool) -> list[int]:  # byte-level BPE adds no prefix
        if normalization:
            segment = unicodedata.normalize(normalization, segment)
        ids: list[int] = []
        for piece in split_pieces(segment, compiled):
            word = "".join(byte_map[b] for b in piece.encode("utf-8"))
            ids.extend(vocab[token] for token in bpe(word))
        return ids

    return lambda text: encode_with_special(text, special or {}, encode_plain)


def score_spm(
    tokens: list[str], scores: list[float], special: dict[str, int] | None = None, add_space_prefix: bool = True
) -> Encoder:
    """Spaces become U+2581, a leading one is prepended, adjacent symbols merge by the highest score of the merged
    piece (leftmost first on ties), and characters missing from the vocabulary fall back to `<0xXX>` byte tokens."""
    vocab = {t: i for i, t in enumerate(tokens)}
    byte_ids = {b: vocab.get(f"<0x{b:02X}>") for b in range(256)}

    def encode_plain(text: str, at_start: bool) -> list[int]:
        text = text.replace(" ", SPACE)
        if at_start and add_space_prefix:
            text = SPACE + text
        ids: list[int] = []
        for piece in _spm_merge(text, vocab, scores):
            token = vocab.get(piece)
            if token is not None:
                ids.append(token)
                continue
            for b in piece.encode("utf-8"):
                byte_id = byte_ids[b]
                if byte_id is None:
                    raise KeyError(f"no byte-fallback token for 0x{b:02X}")
                ids.append(byte_id)
        return ids

    return lambda text: encode_with_special(text, special or {}, encode_plain)


def _spm_merge(text: str, vocab: dict[str, int], scores: list[float]) -> list[str]:
    symbols = list(text)
    alive = [True] * len(symbols)
    nxt = list(range(1, len(symbols) + 1))
    prv = list(range(-1, len(symbols) - 1))
    heap: list[tuple[float, int, int, str]] = []

    def push(left: int) -> None:
        right = nxt[left]
        if right >= len(symbols):
            return
        merged = symbols[left] + symbols[right]
        token = vocab.get(merged)
        if token is not None:
            heapq.heappush(heap, (-scores[token], left, right, merged))

    for i in range(len(symbols) - 1):
        push(i)
    while heap:
        _, left, right, merged = heapq.heappop(heap)
        # Stale entries: a side was merged away or changed since the pair was queued.
        if not (alive[left] and alive[right]) or nxt[left] != right or symbols[left] + symbols[right] != merged:
            continue
        symbols[left] = merged
        alive[right] = False
        nxt[left] = nxt[right]
        if nxt[right] < len(symbols):
            prv[nxt[right]] = left
        if prv[left] >= 0:
            push(prv[left])
        push(left)
    return [s for s, a in zip(symbols, alive) if a]
