"""The header pack: every safetensors header of one hub commit in one msgpack file of onboard's cache, so a second
inspect of the same commit sends no range request (headers are immutable per commit)."""

from __future__ import annotations

from pathlib import Path

import msgspec

from onboard.inspect_checkpoint.hub import cache_write, repo_cache


def _header_pack_path(repo_id: str, sha: str) -> Path:
    return repo_cache(repo_id) / "headers" / f"{sha}.msgpack"


def read_header_pack(repo_id: str, sha: str) -> dict[str, bytes]:
    """The headers of `repo_id` at `sha` read before (shard -> prefix + header bytes); {} when none or unreadable (a
    damaged cache only costs the requests)."""
    path = _header_pack_path(repo_id, sha)
    try:
        return msgspec.msgpack.decode(path.read_bytes(), type=dict[str, bytes]) if path.is_file() else {}
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return {}


def write_header_pack(repo_id: str, sha: str, blobs: dict[str, bytes]) -> None:
    """All of a commit's headers in one file (one write, not one per shard), replaced atomically."""
    cache_write(_header_pack_path(repo_id, sha), msgspec.msgpack.encode(blobs))
