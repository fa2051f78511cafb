"""GGUF metadata (key/values, never tensor data), with the format's definitions from the `gguf` package.

The value types, the magic and the tokenizer key names are llama.cpp's own (gguf.constants), so a new GGUF value
type or key is picked up with the pinned package. The parse itself stays a struct stream: gguf.GGUFReader builds a
numpy view per array item, 25 s against 0.96 s here for the 100k-token ggml-vocab-deepseek-llm.gguf (5.6 s against
0.17 s for llama-spm, 2 loaded cores); tests/test_gguf_reader.py checks both read the same values.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any, BinaryIO

from onboard.errors import InputError

# GGUF scalar value types -> struct format; filled from gguf.GGUFValueType on first use (importing gguf costs numpy).
_NUMPY_TO_STRUCT = {"uint8": "<B", "int8": "<b", "uint16": "<H", "int16": "<h", "uint32": "<I", "int32": "<i",
                    "float32": "<f", "bool": "<?", "uint64": "<Q", "int64": "<q", "float64": "<d"}  # fmt: skip


def _formats() -> tuple[dict[int, str], int, int, bytes]:
    from gguf import GGUF_MAGIC, GGUFReader, GGUFValueType

    scalars = {int(t): _NUMPY_TO_STRUCT[np.__name__] for t, np in GGUFReader.gguf_scalar_to_np.items()}
    return scalars, int(GGUFValueType.STRING), int(GGUFValueType.ARRAY), struct.pack("<I", GGUF_MAGIC)


class _Stream:
    def __init__(self, fh: BinaryIO, name: str) -> None:
        self.fh = fh
        self.name = name
        self.scalars, self.string_type, self.array_type, self.magic = _formats()

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
    """All key/value pairs of a GGUF file. Raises InputError for files that are not GGUF v2/v3."""
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
