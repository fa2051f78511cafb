"""Types shared by the checkpoint readers (local folder and hub) and the analysis."""

from __future__ import annotations

import re
from math import prod

import msgspec

INDEX_FILE = "model.safetensors.index.json"
_DRIVE_RE = re.compile(r"[A-Za-z]:")
# Bytes per element for every dtype safetensors defines. Sub-byte types count as fractions of a byte.
DTYPE_BYTES: dict[str, float] = {
    "F64": 8, "I64": 8, "U64": 8,
    "F32": 4, "I32": 4, "U32": 4,
    "F16": 2, "BF16": 2, "I16": 2, "U16": 2,
    "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "F8_E4M3FNUZ": 1, "F8_E5M2FNUZ": 1,
    "I8": 1, "U8": 1, "BOOL": 1,
    "F6_E2M3": 0.75, "F6_E3M2": 0.75, "F4": 0.5, "E8M0": 1,
}  # fmt: skip


class TensorInfo(msgspec.Struct, frozen=True):
    name: str
    dtype: str
    shape: tuple[int, ...]
    data_offsets: tuple[int, int]
    file: str

    @property
    def numel(self) -> int:
        return prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.data_offsets[1] - self.data_offsets[0]


class SafetensorsHeader(msgspec.Struct, frozen=True):
    file: str  # relative to the repo root, forward slashes
    header_len: int
    file_size: int | None
    tensors: dict[str, TensorInfo]
    metadata: dict[str, str] = msgspec.field(default_factory=dict)


class RepoFile(msgspec.Struct, frozen=True):
    path: str  # relative to the repo root, forward slashes
    size: int | None


class RepoListing(msgspec.Struct, frozen=True):
    """A hub repo's files at one commit: listed once per run and handed to whatever reads the repo next."""

    repo_id: str
    revision: str | None  # what was asked for (None: the default branch)
    sha: str  # the commit it resolved to
    files: tuple[RepoFile, ...]


def is_safe_relpath(name: str) -> bool:
    """Relative, forward slashes, no `..`, no drive or absolute part: stays inside the repo."""
    if not name or name.startswith(("/", "\\")) or "\\" in name or _DRIVE_RE.match(name):
        return False
    return ".." not in name.split("/")
