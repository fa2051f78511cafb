"""A minimal GGUF key/value reader: the header and metadata only, never tensor data.

The `gguf` package builds a numpy view per array item (seconds for a 100k-token vocabulary); the metadata is a plain
length-prefixed little-endian stream (GGUF v2/v3), which struct reads in well under a second.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any, BinaryIO

from onboard.errors import InputError

MAGIC = b"GGUF"
# GGUF value types -> struct format (scalars); 8 = string, 9 = array.
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


class _Stream:
    def __init__(self, fh: BinaryIO, name: str) -> None:
        self.fh = fh
        self.name = name

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
        if kind in _SCALARS:
            return self.unpack(_SCALARS[kind])
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            item_kind, count = self.unpack("<I"), self.unpack("<Q")
            if item_kind == _STRING:
                return [self.string() for _ in range(count)]
            if item_kind in _SCALARS:
                fmt = _SCALARS[item_kind]
                return list(struct.unpack(f"<{count}{fmt[1:]}", self.take(count * struct.calcsize(fmt))))
            return [self.value(item_kind) for _ in range(count)]
        raise InputError(f"{self.name}: unknown GGUF value type {kind}", "the file is corrupt or a newer GGUF version")


def read_gguf_metadata(path: Path) -> dict[str, Any]:
    """All key/value pairs of a GGUF file. Raises InputError for files that are not GGUF v2/v3."""
    with path.open("rb") as fh:
        stream = _Stream(fh, path.name)
        if stream.take(4) != MAGIC:
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
