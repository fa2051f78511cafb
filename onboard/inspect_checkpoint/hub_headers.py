"""Safetensors headers from the hub with HTTP range requests, one per shard as the rule, and their cache.

Each shard's first range is sized from the index (its tensor names and the shard's size give the header length to a
few percent); a second request fetches only the rest when the estimate was short. The header pack keeps every header
of one commit in one msgpack file of onboard's cache, so a second inspect of that commit sends no range request.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import groupby
from operator import itemgetter
from pathlib import Path

import msgspec

from onboard.errors import CheckpointError, SourceNotFound
from onboard.inspect_checkpoint import hub
from onboard.inspect_checkpoint.checkpoint_types import SafetensorsHeader, is_safe_relpath
from onboard.inspect_checkpoint.hub import ByteCounter, cache_write, repo_cache
from onboard.inspect_checkpoint.safetensors_header import PREFIX_LEN, check_header_len, claimed_len, parse_header

FIRST_RANGE = 100_000  # bytes asked for first when the index cannot size the range (no index, shard not in it)
MAX_FIRST_RANGE = 4_000_000
# Header characters per tensor besides its name and offsets: `"":{"dtype":"","shape":[],"data_offsets":[,]},` is 46;
# with the dtype and a 2-D shape, safetensors-written headers measure 51-58. 60 errs on the long side.
ENTRY_CHARS = 60
HEADER_OVERHEAD = 8 + 64  # the length prefix, `{"__metadata__":{"format":"pt"}}` and up to 7 bytes of padding
ESTIMATE_MARGIN = 1.08  # shards with wider shapes than average: a miss costs a round trip, 8% costs bytes only


def header_ranges(weight_map: dict[str, str], sizes: Mapping[str, int | None]) -> dict[str, int]:
    """Bytes to ask for first per shard (length prefix + estimated header + margin), from the index's tensor names.
    A header entry is the name plus ENTRY_CHARS plus two offsets, whose digits the shard's size bounds. Names are
    summed per run of one shard (an index lists a shard's tensors in a few long runs), so the sums run in C."""
    chars: dict[str, int] = {}
    counts: dict[str, int] = {}
    for shard, run in groupby(weight_map.items(), key=itemgetter(1)):
        names = list(map(itemgetter(0), run))
        chars[shard] = chars.get(shard, 0) + sum(map(len, names))
        counts[shard] = counts.get(shard, 0) + len(names)
    out: dict[str, int] = {}
    for shard, n in counts.items():
        if not isinstance(shard, str):
            continue
        size = sizes.get(shard)
        offset_digits = 2 * len(str(size)) if size else 22
        estimate = HEADER_OVERHEAD + chars[shard] + n * (ENTRY_CHARS + offset_digits)
        out[shard] = min(MAX_FIRST_RANGE, int(estimate * ESTIMATE_MARGIN) + 256)
    return out


def header_bytes_of(
    repo_id: str, sha: str, name: str, size: int | None, counter: ByteCounter, first_range: int = FIRST_RANGE
) -> bytes:
    """Prefix + header bytes of one shard: one range request, a second only for the rest of a longer header."""
    if not is_safe_relpath(name):
        raise CheckpointError("path-traversal", f"{name}: path leaves the repo", "fix the index's weight_map", name)
    if hub.offline():
        raise SourceNotFound(
            f"the safetensors header of {name} ({repo_id} at {sha[:12]}) is not cached and HF_HUB_OFFLINE=1",
            "run the same command once with network access, or unset HF_HUB_OFFLINE",
        )
    first_end = (first_range if size is None else min(first_range, size)) - 1  # never past the file's end
    if first_end < 0:
        raise CheckpointError("truncated", f"{name}: file is empty", None, name)
    url, what = f"{hub.endpoint()}/{repo_id}/resolve/{sha}/{name}", f"{name} of hub repo {repo_id!r}"
    try:
        blob = hub.get_range(url, 0, first_end, what, counter)
        header_len = claimed_len(name, blob)
        check_header_len(name, header_len, size)  # before anything of that size is asked for
        need = PREFIX_LEN + header_len
        if len(blob) < need:  # the estimate was short: only the rest
            blob += hub.get_range(url, len(blob), need - 1, what, counter)
    except SourceNotFound as exc:
        from huggingface_hub.errors import EntryNotFoundError

        if isinstance(exc.__cause__, EntryNotFoundError):
            raise CheckpointError("missing-shard", f"{name}: not found in {repo_id} at {sha[:12]}", None, name) from exc
        raise
    return blob[:need]


def parse_header_blob(name: str, blob: bytes, size: int | None) -> SafetensorsHeader:
    return parse_header(name, claimed_len(name, blob), blob[PREFIX_LEN:], size)


def _header_pack_path(repo_id: str, sha: str) -> Path:
    return repo_cache(repo_id) / "headers" / f"{sha}.msgpack"


def read_header_pack(repo_id: str, sha: str) -> dict[str, bytes]:
    """Shard -> prefix + header bytes read before; {} when none or unreadable (a damaged cache only costs requests)."""
    path = _header_pack_path(repo_id, sha)
    try:
        return msgspec.msgpack.decode(path.read_bytes(), type=dict[str, bytes]) if path.is_file() else {}
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return {}


def write_header_pack(repo_id: str, sha: str, blobs: dict[str, bytes]) -> None:
    cache_write(_header_pack_path(repo_id, sha), msgspec.msgpack.encode(blobs))
