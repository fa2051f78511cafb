"""Read and validate safetensors headers (`u64 length N` + N bytes of JSON), never the tensor data.

The common case takes a fast path (msgspec decodes into small C structs, one loop checks dtypes, sizes and
contiguity); anything unusual falls back to a slow path that re-parses with `json` and names the exact problem.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterator, Mapping
from math import prod
from pathlib import Path
from typing import Any, Literal, NamedTuple

import msgspec

from onboard.errors import CheckpointError
from onboard.inspect_checkpoint.checkpoint_types import DTYPE_BYTES, SafetensorsHeader, TensorInfo

# safetensors itself caps headers at 100 MB; a claim above that is corruption or an attack (we would allocate it).
MAX_HEADER_LEN = 100_000_000
PREFIX_LEN = 8
_HINT_REDOWNLOAD = "the file is damaged or incomplete: download it again (and compare its size with the hub's listing)"
_HINT_WRITER = "the header is inconsistent: re-save the checkpoint with the `safetensors` library"


class _Entry(NamedTuple):  # the slow path's record: the fast path's `_Struct` attributes
    dtype: str
    shape: tuple[int, ...]
    data_offsets: tuple[int, int]


class _Struct(msgspec.Struct, gc=False):
    # Defaults let `__metadata__` decode into an empty record. An unknown dtype fails the decode: the slow path names it.
    dtype: Literal[tuple(DTYPE_BYTES)] = ""  # type: ignore[valid-type]
    shape: tuple[int, ...] = ()
    data_offsets: tuple[int, int] = (-1, -1)


class _Meta(msgspec.Struct):
    metadata: dict[str, str] = msgspec.field(default_factory=dict, name="__metadata__")


_DECODE = msgspec.json.Decoder(dict[str, _Struct]).decode
_DECODE_META = msgspec.json.Decoder(_Meta).decode


_COMMON_METADATA = {
    f'{{"__metadata__":{{"format":"{fmt}"}}'.encode(): {"format": fmt} for fmt in ("pt", "np", "tf", "flax", "mlx")
}


class TensorMap(Mapping[str, TensorInfo]):
    """name -> TensorInfo, built lazily; `records` gives the decoded records without building TensorInfo objects."""

    __slots__ = ("_raw", "_file", "_cache")

    def __init__(self, raw: dict[str, Any], file: str) -> None:
        self._raw = raw
        self._file = file
        self._cache: dict[str, TensorInfo] = {}

    def __getitem__(self, name: str) -> TensorInfo:
        info = self._cache.get(name)
        if info is None:
            e = self._raw[name]
            info = TensorInfo(name, e.dtype, tuple(e.shape), tuple(e.data_offsets), self._file)
            self._cache[name] = info
        return info

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def __contains__(self, name: object) -> bool:
        return name in self._raw

    @property
    def records(self) -> Mapping[str, Any]:
        """name -> decoded record (`.dtype`, `.shape`, `.data_offsets`)."""
        return self._raw


def read_local_header(path: Path, rel_name: str) -> SafetensorsHeader:
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            header_len = claimed_len(rel_name, f.read(PREFIX_LEN))
            check_header_len(rel_name, header_len, size)
            header_bytes = f.read(header_len)
    except OSError as exc:
        raise CheckpointError(
            "unreadable", f"{rel_name}: cannot read ({exc.strerror or exc})", "check the file's permissions", rel_name
        ) from exc
    return parse_header(rel_name, header_len, header_bytes, size)


def claimed_len(file: str, prefix: bytes) -> int:
    """The header length the file's 8-byte prefix claims."""
    if len(prefix) < PREFIX_LEN:
        raise _err("truncated", file, f"file is truncated: {len(prefix)} bytes, too short for the 8-byte header length")
    return struct.unpack("<Q", prefix[:PREFIX_LEN])[0]


def check_header_len(file: str, header_len: int, file_size: int | None) -> None:
    """Reject a header length before anything of that size is read or allocated."""
    if header_len > MAX_HEADER_LEN:
        raise _err(
            "header-length-invalid",
            file,
            f"header claims {header_len:,} bytes, more than the {MAX_HEADER_LEN:,}-byte limit safetensors allows",
        )
    if header_len < 2:  # the smallest JSON object, "{}"
        raise _err("header-length-invalid", file, f"header length {header_len} is too small for a JSON object")
    if file_size is not None and PREFIX_LEN + header_len > file_size:
        raise _err(
            "header-past-eof",
            file,
            f"header claims {header_len:,} bytes but the file is only {file_size:,} bytes long",
        )


def parse_header(file: str, header_len: int, header_bytes: bytes, file_size: int | None) -> SafetensorsHeader:
    """Validate one header; CheckpointError(code) names the file and tensor otherwise. `file_size` (None when
    unknown) enables the checks against the end of the file."""
    check_header_len(file, header_len, file_size)
    if len(header_bytes) < header_len:
        raise _err("truncated", file, f"file is truncated inside its {header_len:,}-byte header")
    header_bytes = header_bytes[:header_len] if len(header_bytes) > header_len else header_bytes
    data_len = None if file_size is None else file_size - PREFIX_LEN - header_len
    fast = _fast_parse(file, header_len, header_bytes, file_size, data_len)
    if fast is not None:
        return fast
    return _slow_parse(file, header_len, header_bytes, file_size, data_len)


def _fast_parse(
    file: str, header_len: int, header_bytes: bytes, file_size: int | None, data_len: int | None
) -> SafetensorsHeader | None:
    """The common, valid case in one pass; None means 'something is off, let the slow path explain'."""
    try:
        raw = _DECODE(header_bytes)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    metadata: dict[str, str] = {}
    if "__metadata__" in raw:
        del raw["__metadata__"]
        # Almost every writer starts with `{"__metadata__":{"format":"pt"}}`: no second pass over the header for it.
        common = _COMMON_METADATA.get(header_bytes[: header_bytes.find(b"}") + 1])
        try:
            metadata = dict(common) if common is not None else _DECODE_META(header_bytes).metadata
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None
    sizes = DTYPE_BYTES
    pos = 0
    # Writers lay tensors out in the order of the header's keys; a file written in another order takes the slow path.
    for e in raw.values():
        begin, end = e.data_offsets
        size = sizes.get(e.dtype)
        if begin != pos or size is None or end - begin != prod(e.shape) * size:
            return None
        pos = end
    if data_len is not None and pos != data_len:
        return None
    return SafetensorsHeader(file, header_len, file_size, TensorMap(raw, file), metadata)


def _slow_parse(
    file: str, header_len: int, header_bytes: bytes, file_size: int | None, data_len: int | None
) -> SafetensorsHeader:
    """Full validation with a precise error, or a valid header written in an unusual order."""
    try:
        doc = json.loads(header_bytes)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        where = f" at byte {exc.pos}" if isinstance(exc, json.JSONDecodeError) else ""
        raise _err("header-not-json", file, f"header is not valid JSON{where} ({exc})") from exc
    if not isinstance(doc, dict):
        raise _err("header-not-json", file, f"header is a JSON {type(doc).__name__}, not an object")
    metadata = doc.pop("__metadata__", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise _err("header-invalid", file, "__metadata__ must map strings to strings")
    raw = {name: _check_entry(file, name, t) for name, t in doc.items()}
    spans = sorted((e.data_offsets[0], e.data_offsets[1], name) for name, e in raw.items())
    return _check_layout(file, header_len, file_size, data_len, raw, spans, metadata)


def _check_entry(file: str, name: str, t: Any) -> _Entry:
    if not isinstance(t, dict):
        raise _err("header-invalid", file, "entry is not an object", name)
    dtype, shape, offsets = t.get("dtype"), t.get("shape"), t.get("data_offsets")
    if dtype not in DTYPE_BYTES:
        raise _err(
            "unknown-dtype",
            file,
            f"unknown dtype {dtype!r} (known: {', '.join(sorted(DTYPE_BYTES))})",
            name,
            hint="the file was written by a newer or non-standard writer: check its safetensors version",
        )
    if not isinstance(shape, list) or not all(_is_count(d) for d in shape):
        raise _err("header-invalid", file, f"shape {shape!r} is not a list of non-negative integers", name)
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_count(o) for o in offsets)):
        raise _err("header-invalid", file, f"data_offsets {offsets!r} is not a pair of non-negative integers", name)
    begin, end = offsets
    if end < begin:
        raise _err("header-invalid", file, f"data_offsets [{begin}, {end}] end before they begin", name)
    expected = prod(shape) * DTYPE_BYTES[dtype]
    if end - begin != expected:
        raise _err(
            "size-mismatch",
            file,
            f"{end - begin:,} bytes at [{begin}, {end}] but shape {shape} of {dtype} needs {expected:,}",
            name,
            hint=_HINT_WRITER,
        )
    return _Entry(dtype, tuple(shape), (begin, end))


def _check_layout(
    file: str,
    header_len: int,
    file_size: int | None,
    data_len: int | None,
    raw: dict[str, _Entry],
    spans: list[tuple[int, int, str]],
    metadata: dict[str, str],
) -> SafetensorsHeader:
    """Offsets must tile the data region exactly: from 0, no gaps, no overlaps, ending at the end of the file."""
    problem: tuple[str, str, str | None] | None = None
    past_eof: tuple[int, int, str] | None = None
    pos, prev = 0, None
    for begin, end, name in spans:
        if problem is None and begin > pos:
            where = f"after {prev!r}" if prev else "at the start of the data region"
            problem = ("offsets-gap", f"{begin - pos:,} unused bytes {where} (before it at {begin})", name)
        elif problem is None and begin < pos:
            problem = ("offsets-overlap", f"data [{begin}, {end}] overlaps {prev!r} (which ends at {pos})", name)
        if past_eof is None and data_len is not None and end > data_len:
            past_eof = (begin, end, name)
        pos, prev = max(pos, end), name
    if past_eof is not None:
        begin, end, name = past_eof
        if problem is None:  # a consistent layout that the file does not hold: the file was cut short
            raise _err(
                "truncated",
                file,
                f"file is truncated: {file_size:,} bytes, but its header describes {PREFIX_LEN + header_len + pos:,}"
                f" (data from {name!r} on is missing)",
            )
        raise _err(
            "offsets-past-eof",
            file,
            f"data_offsets [{begin}, {end}] reach past the end of the data region ({data_len:,} bytes)",
            name,
            hint=_HINT_WRITER,
        )
    if problem is not None:
        code, message, name = problem
        raise _err(code, file, message, name, hint=_HINT_WRITER)
    if data_len is not None and pos < data_len:
        raise _err("offsets-gap", file, f"{data_len - pos:,} bytes after the last tensor are not described")
    return SafetensorsHeader(file, header_len, file_size, TensorMap(raw, file), metadata)


def _is_count(x: object) -> bool:
    return type(x) is int and x >= 0


def _err(code: str, file: str, message: str, tensor: str | None = None, hint: str | None = None) -> CheckpointError:
    where = f"{file}: tensor {tensor!r}: " if tensor else f"{file}: "
    exc = CheckpointError(code, where + message, hint or _HINT_REDOWNLOAD, file=file)
    exc.tensor = tensor  # type: ignore[attr-defined]  # lets integrity findings name the tensor
    return exc
