"""The header pack: every safetensors header of one hub commit in one msgpack file of onboard's cache, so a second
inspect of the same commit sends no range request (headers are immutable per commit). Written in the background,
off inspect's critical path; a reader waits for a write of the same pack still in flight."""

from __future__ import annotations

import threading
from pathlib import Path

from onboard.inspect_checkpoint.hub import cache_write, repo_cache


def _header_pack_path(repo_id: str, sha: str) -> Path:
    return repo_cache(repo_id) / "headers" / f"{sha}.msgpack"


def read_header_pack(repo_id: str, sha: str) -> dict[str, bytes]:
    """The headers of `repo_id` at `sha` read before (shard -> prefix + header bytes); {} when none or unreadable (a
    damaged cache only costs the requests)."""
    import msgspec

    path = _header_pack_path(repo_id, sha)
    _wait_for_pack(path)
    try:
        return msgspec.msgpack.decode(path.read_bytes(), type=dict[str, bytes]) if path.is_file() else {}
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return {}


_pack_writes: dict[Path, threading.Thread] = {}
_pack_lock = threading.Lock()


def write_header_pack(repo_id: str, sha: str, blobs: dict[str, bytes]) -> None:
    """One file per commit for all its headers: one write instead of one per shard (163 atomic writes cost ~0.1 s of
    CPU in a hub inspect of DeepSeek-V3). Written by a background thread, off inspect's critical path (12 MB for
    DeepSeek-V3); not a daemon, so the process finishes the write before it exits, and `read_header_pack` waits for it.
    """
    path = _header_pack_path(repo_id, sha)
    blobs = dict(blobs)  # the caller's dict may grow while the thread encodes it
    with _pack_lock:
        before = _pack_writes.get(path)
        thread = threading.Thread(target=_write_pack, args=(path, blobs, before), name="onboard-header-pack")
        _pack_writes[path] = thread
        thread.start()


def _write_pack(path: Path, blobs: dict[str, bytes], before: threading.Thread | None) -> None:
    if before is not None:
        before.join()  # writes of one pack land in the order they were asked for
    cache_write(path, msgpack_frames(blobs))
    with _pack_lock:
        if _pack_writes.get(path) is threading.current_thread():
            del _pack_writes[path]


def msgpack_frames(blobs: dict[str, bytes]) -> list[bytes]:
    """`blobs` as msgpack (a map32 of str -> bin32, what `read_header_pack` decodes), in pieces around the blobs.

    Why not msgspec.msgpack.encode: it copies all 12 MB of DeepSeek-V3's headers into one buffer while holding the
    GIL (~9 ms), which this background writer then took from inspect's main thread right after the headers
    arrived. The pieces are written one by one, and each write releases the GIL."""
    import msgspec

    frames = [b"\xdf" + len(blobs).to_bytes(4, "big")]
    for name, blob in blobs.items():
        frames += (msgspec.msgpack.encode(name), b"\xc6" + len(blob).to_bytes(4, "big"), blob)
    return frames


def wait_for_pack_writes() -> None:
    """Until every header pack write started so far has landed (a benchmark's repeats must not overlap them)."""
    with _pack_lock:
        threads = list(_pack_writes.values())
    for thread in threads:
        thread.join()


def _wait_for_pack(path: Path) -> None:
    with _pack_lock:
        thread = _pack_writes.get(path)
    if thread is not None:
        thread.join()
