"""The tokenizer under test: what transformers' AutoTokenizer builds from the repo (what serving engines load).

Encoding goes straight to the `tokenizers` backend when there is one (that is what AutoTokenizer runs anyway), so
verification costs little more than the encode itself.
"""

from __future__ import annotations

import logging
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onboard.errors import InputError


@dataclass
class Subject:
    hf: Any
    """transformers PreTrainedTokenizerBase."""
    backend: Any | None
    """tokenizers.Tokenizer, when the tokenizer is backed by one."""
    class_name: str

    def encode_batch(self, texts: list[str], add_special_tokens: bool = False) -> list[list[int]]:
        if self.backend is not None:
            return [e.ids for e in self.backend.encode_batch(texts, add_special_tokens=add_special_tokens)]
        return [self.hf.encode(t, add_special_tokens=add_special_tokens) for t in texts]

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return self.hf.encode(text, add_special_tokens=add_special_tokens)

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return self.hf.decode(ids, skip_special_tokens=skip_special_tokens, clean_up_tokenization_spaces=False)

    def decode_batch(self, batch: list[list[int]]) -> list[str]:
        if self.backend is not None:
            return self.backend.decode_batch(batch, skip_special_tokens=False)
        return [self.decode(ids) for ids in batch]

    def pieces(self, ids: list[int]) -> list[str]:
        """Each id decoded on its own: the readable form of a diff."""
        return [self.hf.decode([i], clean_up_tokenization_spaces=False) for i in ids]

    def token_id(self, text: str | None) -> int | None:
        if not text:
            return None
        found = self.hf.convert_tokens_to_ids(text)
        unk = getattr(self.hf, "unk_token_id", None)
        return None if found is None or (found == unk and text != getattr(self.hf, "unk_token", None)) else found

    def __len__(self) -> int:
        return len(self.hf)


def load_subject(root: Path) -> Subject:
    """AutoTokenizer from a local folder, offline. The repository's code runs only inside the sandbox worker's
    `remote_code_allowed()` (onboard/reference.py); elsewhere trust_remote_code=False. Unusable files: InputError."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    from transformers import AutoTokenizer

    from onboard.reference import tokenizer_needs_code, trust_remote_code

    logging.getLogger("transformers").setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tok = AutoTokenizer.from_pretrained(str(root), trust_remote_code=trust_remote_code(), local_files_only=True)
    except Exception as exc:  # transformers raises many types (ValueError, OSError, Exception from tokenizers)
        needs = tokenizer_needs_code(root)
        raise InputError(
            f"{root.name}: transformers cannot load the tokenizer ({type(exc).__name__}: {_first_line(exc)})",
            f"{needs}: `onboard verify-tokenizer SOURCE --trust-remote-code` runs it in a sandbox"
            if needs
            else "check tokenizer.json / tokenizer_config.json (truncated download? wrong tokenizer_class?)",
        ) from exc
    backend = getattr(tok, "backend_tokenizer", None) or getattr(tok, "_tokenizer", None)
    return Subject(tok, backend, type(tok).__name__)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else ""
