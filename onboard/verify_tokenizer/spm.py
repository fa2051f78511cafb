"""Independent pure-Python SentencePiece-BPE (llama.cpp's `llm_tokenizer_spm`), for GGUF `llama` vocabularies.

Spaces become U+2581, a leading U+2581 is prepended, adjacent symbols are merged by the highest score of the merged
piece (leftmost first on ties), and characters missing from the vocabulary fall back to `<0xXX>` byte tokens.
"""

from __future__ import annotations

import heapq

from onboard.verify_tokenizer.bpe import encode_with_special

SPACE = "\u2581"


class ScoreSPM:
    def __init__(
        self,
        tokens: list[str],
        scores: list[float],
        special: dict[str, int] | None = None,
        add_space_prefix: bool = True,
    ) -> None:
        self.vocab = {t: i for i, t in enumerate(tokens)}
        self.scores = scores
        self.special = dict(special or {})
        self.add_space_prefix = add_space_prefix
        self.byte_ids = {b: self.vocab.get(f"<0x{b:02X}>") for b in range(256)}

    def _merge(self, text: str) -> list[str]:
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
            token = self.vocab.get(merged)
            if token is not None:
                heapq.heappush(heap, (-self.scores[token], left, right, merged))

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

    def _encode_plain(self, text: str, prefix: bool) -> list[int]:
        text = text.replace(" ", SPACE)
        if prefix and self.add_space_prefix:
            text = SPACE + text
        ids: list[int] = []
        for piece in self._merge(text):
            token = self.vocab.get(piece)
            if token is not None:
                ids.append(token)
                continue
            for b in piece.encode("utf-8"):
                byte_id = self.byte_ids[b]
                if byte_id is None:
                    raise KeyError(f"no byte-fallback token for 0x{b:02X}")
                ids.append(byte_id)
        return ids

    def encode(self, text: str) -> list[int]:
        return encode_with_special(text, self.special, self._encode_plain)
