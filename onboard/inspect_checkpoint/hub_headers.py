"""Safetensors headers from the hub with HTTP range requests: one request per shard as the rule.

* `header_ranges`: each shard's first range, sized from the index (its tensor names and the shard's size give the
  header length to a few percent); a second request fetches only the rest when the estimate was short.
* `header_bytes_of`: one shard's prefix and header bytes, every request through hub.py's helpers (huggingface_hub's
  session, auth headers, backoff with Retry-After, and error mapping); HubSource runs it on its bounded thread pool
  and caches the bytes per commit.
* `parse_header_blob`: the bytes fetched, validated (safetensors_header.py).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from itertools import groupby
from operator import itemgetter

from onboard.errors import CheckpointError, SourceNotFound
from onboard.inspect_checkpoint import hub
from onboard.inspect_checkpoint.checkpoint_types import SafetensorsHeader
from onboard.inspect_checkpoint.hub import ByteCounter
from onboard.inspect_checkpoint.safetensors_header import PREFIX_LEN, check_header_len, parse_header

FIRST_RANGE = 100_000  # bytes asked for first when the index cannot size the range (no index, shard not in it)
MAX_FIRST_RANGE = 4_000_000
# Header length per tensor, besides its name: `"":{"dtype":"","shape":[],"data_offsets":[,]},` is 46 characters;
# the dtype (3-7), the shape's digits (a 2-D weight: ~10) and the two offsets (each at most as many digits as the
# shard's size) make the rest. Calibrated on safetensors-written headers (tiny transformers checkpoints, the trained
# fixture, a DeepSeek-V3-sized synthetic): 51-58 characters + two offsets' digits; 60 errs on the long side.
ENTRY_CHARS = 60
HEADER_OVERHEAD = 8 + 64  # the length prefix, `{"__metadata__":{"format":"pt"}}` and up to 7 bytes of padding
ESTIMATE_MARGIN = 1.08  # shards with wider shapes than average: a miss costs a round trip, 8% costs bytes only


def header_ranges(weight_map: dict[str, str], sizes: Mapping[str, int | None]) -> dict[str, int]:
    """Bytes to ask for first per shard (length prefix + estimated header + margin), from the index's tensor names.

    A header entry is the tensor's name plus ENTRY_CHARS plus its two data offsets, whose digits the shard's size
    bounds. The names are summed per run of one shard in the index's order: an index lists a shard's tensors in a
    few long runs (by shard, or sorted by name with layers kept together), so the sum runs in C per run, not as a
    Python step per tensor.
    """
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
    """Prefix + header bytes of one shard from the hub, through huggingface_hub's backoff: one range request, a second
    only for the rest of a longer header. Parsing is left to the caller, which also caches the bytes (HubSource, one
    pack per commit)."""
    if _leaves_repo(name):
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
        need = _header_need(name, blob, size)
        if len(blob) < need:  # the estimate was short: only the rest
            blob += hub.get_range(url, len(blob), need - 1, what, counter)
    except SourceNotFound as exc:
        raise _missing_shard(exc, repo_id, sha, name) from exc
    return blob[:need]


def _missing_shard(exc: SourceNotFound, repo_id: str, sha: str, name: str) -> Exception:
    from huggingface_hub.errors import EntryNotFoundError

    if isinstance(exc.__cause__, EntryNotFoundError):
        return CheckpointError("missing-shard", f"{name}: not found in {repo_id} at {sha[:12]}", None, name)
    return exc


def _leaves_repo(name: str) -> bool:
    return name.startswith("/") or ".." in name.split("/")


def _header_need(name: str, blob: bytes, size: int | None) -> int:
    """Bytes of prefix + header, from the first bytes of the file; a claimed length is checked before anything of
    that size is asked for (or allocated)."""
    header_len = _claimed_len(name, blob)
    check_header_len(name, header_len, size)
    return PREFIX_LEN + header_len


def parse_header_blob(name: str, blob: bytes, size: int | None) -> SafetensorsHeader:
    return parse_header(name, _claimed_len(name, blob), blob[PREFIX_LEN:], size)


def _claimed_len(name: str, blob: bytes) -> int:
    """The header length the file's 8-byte prefix claims."""
    if len(blob) < PREFIX_LEN:
        raise CheckpointError("truncated", f"{name}: file is {len(blob)} bytes, too short for a header", None, name)
    return struct.unpack("<Q", blob[:PREFIX_LEN])[0]
