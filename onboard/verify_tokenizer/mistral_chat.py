"""mistral-common as a *chat* reference: a request (messages + tools) -> the text and ids Mistral's own library encodes.

The HF chat template + tokenizer of a Mistral checkpoint should reproduce these ids; when they do not, the first
difference says whether the template (spacing, tool-call / tool-result serialisation) or the tokenizer (`legacy`
spacing after control tokens) is to blame. mistral-common is optional: a missing library is an InputError with the
install hint, a file it cannot read an InputError naming the file.
"""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onboard.errors import InputError

BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


@dataclass(frozen=True)
class ChatEncoding:
    text: str
    """mistral-common's rendering: SentencePiece pieces joined (`▁` for spaces, `<0x0A>` for byte pieces)."""
    ids: list[int]


@dataclass(frozen=True)
class MistralChatReference:
    file: str
    tokenizer: Any
    """mistral_common MistralTokenizer."""

    def encode_chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> ChatEncoding:
        """Validate and encode an OpenAI-style request the way Mistral's API does; rejections are InputError."""
        from mistral_common.protocol.instruct.messages import ChatMessage
        from mistral_common.protocol.instruct.request import ChatCompletionRequest

        request = json.dumps({"model": "reference", "messages": messages, "tools": tools or []})
        try:
            parsed = ChatCompletionRequest[ChatMessage].model_validate_json(request)  # type: ignore[index]
            encoded = self.tokenizer.encode_chat_completion(parsed)
        except Exception as exc:  # pydantic validation and mistral-common's own feature checks
            raise InputError(
                f"mistral-common ({self.file}) rejects the conversation: {type(exc).__name__}: {exc}",
                "this tokenizer version does not support the request (e.g. parallel tool results before v3)",
            ) from exc
        ids = list(encoded.tokens)
        with warnings.catch_warnings():  # `Tokenized.text` is deprecated; the joined pieces are the same string
            warnings.simplefilter("ignore", DeprecationWarning)
            text = getattr(encoded, "text", None)
        if not isinstance(text, str):
            raw = self.tokenizer.instruct_tokenizer.tokenizer
            text = "".join(raw.id_to_piece(i) for i in ids)
        return ChatEncoding(text, ids)


def load_mistral_chat(path: Path) -> MistralChatReference:
    """A chat reference from a mistral-common tokenizer file (`tokenizer.model.vN`, `tekken.json`)."""
    try:
        from mistral_common.tokens.tokenizers.mistral import MistralTokenizer
    except ImportError as exc:
        raise InputError("mistral-common is not installed", "pip install mistral-common") from exc
    try:
        return MistralChatReference(path.name, MistralTokenizer.from_file(str(path)))
    except Exception as exc:
        raise InputError(f"{path.name}: mistral-common cannot load it ({exc})", "re-download the file") from exc


def plain_text(pieces_text: str) -> str:
    """mistral-common's piece text as the plain string a chat template renders (`▁` -> space, `<0x0A>` -> newline).

    Consecutive byte pieces form one UTF-8 sequence, so they are decoded together.
    """
    out = BYTE_PIECE.sub(lambda m: f"\x00{m.group(1)}", pieces_text.replace("▁", " "))
    return re.sub(
        r"(?:\x00[0-9A-Fa-f]{2})+",
        lambda m: bytes.fromhex(m.group(0).replace("\x00", "")).decode(errors="replace"),
        out,
    )
