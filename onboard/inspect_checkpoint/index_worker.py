"""The shard index checked on a second core while the headers are read.

A large checkpoint's model.safetensors.index.json is as long as all its headers together (9 MB for 93k tensors), and
decoding it and matching it against the headers took a fifth of `onboard inspect`. Where the process can fork
(Linux, one thread, a second CPU, the index at least FORK_FROM_BYTES), a forked worker decodes the index and sends
back its shards in order and, per shard, how many tensors it lists there and a hash of their names. The parent reads
the headers meanwhile (the shards the folder holds) and compares.

Equal everywhere means integrity's index checks would find nothing (each shard holds exactly the tensors the index
gives it, no listed shard is missing, no top-level shard is unlisted), so the index is not decoded again. Anything
else (a difference, an index the worker does not take as usual, the worker failing) and the parent decodes the index
itself: integrity then reports exactly what it always did. The fast path only ever skips work that finds nothing.

The hash is Python's hash of the set of names. String hashes are keyed with a random secret per process, which the
forked worker shares, so two different name sets match with a chance of about 2**-64 and a file cannot be built to
match on purpose; with hash randomization off (PYTHONHASHSEED=0) the worker is not used. `ONBOARD_INSPECT_FORK=0`
turns it off.
"""

from __future__ import annotations

import os
import sys
from typing import NamedTuple

import msgspec

from onboard.errors import CheckpointError
from onboard.inspect_checkpoint.checkpoint_types import SafetensorsHeader
from onboard.inspect_checkpoint.source import INDEX_FILE, LocalSource, Source, is_safe_relpath, is_top_level_shard

FORK_FROM_BYTES = 2 << 20  # below this the index decodes faster than a fork and a pipe round trip
# A fork copies the page tables: ~1 ms for the CLI's ~60 MB, but tens of ms for a process holding gigabytes (a
# pipeline with a model loaded), more than the worker saves.
FORK_MAX_RSS = 1 << 30
Headers = dict[str, SafetensorsHeader | CheckpointError]


class IndexDigest(msgspec.Struct, array_like=True):
    # shard -> (tensors the index lists there, hash of their names), the shards in the index's order
    names: dict[str, tuple[int, int]]


class ShardHeaders(NamedTuple):
    shards: list[str]  # what inspect reads (the index's shards in its order, else the top-level files)
    headers: Headers
    index_matches: bool  # the worker's digest matched every header: integrity need not decode the index


def read_shard_headers(src: Source) -> ShardHeaders:
    """The shards' headers, with the index matched against them on a second core where that pays."""
    worker = _Worker.start(src)
    if worker is None:
        shards = src.safetensors_files()
        return ShardHeaders(shards, src.read_headers(shards) if shards else {}, False)
    try:
        headers = src.read_headers(src.top_level_shards())
        digest = worker.result()
    finally:
        worker.close()
    if digest is not None and _matches(digest, headers):
        return ShardHeaders(list(digest.names), {s: headers[s] for s in digest.names}, True)
    shards = src.safetensors_files()  # the index decoded here, as without the worker
    headers.update(src.read_headers([s for s in shards if s not in headers]))
    return ShardHeaders(shards, {s: headers[s] for s in shards}, False)


def _matches(digest: IndexDigest, headers: Headers) -> bool:
    if digest.names.keys() != headers.keys():
        return False
    for shard, h in headers.items():
        if not isinstance(h, SafetensorsHeader):
            return False
        if digest.names.get(shard) != (len(h.tensors), hash(frozenset(h.tensors))):
            return False
    return True


def _digest(src: Source) -> IndexDigest | None:
    """In the worker: the index's digest, or None where the parent must judge the index itself."""
    index = src.index()
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict):
        return None
    by_shard: dict[str, list[str]] = {}
    for name, shard in weight_map.items():
        if not isinstance(shard, str):
            return None
        by_shard.setdefault(shard, []).append(name)
    if not all(is_safe_relpath(s) and is_top_level_shard(s) for s in by_shard):
        return None
    return IndexDigest({s: (len(names), hash(frozenset(names))) for s, names in by_shard.items()})


def _usable(src: Source) -> bool:
    if os.environ.get("ONBOARD_INSPECT_FORK") == "0" or not isinstance(src, LocalSource):
        return False
    if sys.platform != "linux" or not sys.flags.hash_randomization:
        return False
    size = src.file_size(INDEX_FILE)
    return size is not None and size >= FORK_FROM_BYTES and spare_cpu() and single_threaded() and _small_process()


def spare_cpu() -> bool:
    """A second CPU to run the worker on (on one CPU it would only add a fork)."""
    return len(os.sched_getaffinity(0)) >= 2


def _small_process() -> bool:
    try:
        with open("/proc/self/statm", "rb") as f:
            resident_pages = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return False
    return resident_pages * os.sysconf("SC_PAGE_SIZE") < FORK_MAX_RSS


def single_threaded() -> bool:
    """No other thread in the process (a torch pool, an HTTP client): forking one with threads is unsafe."""
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


class _Worker:
    def __init__(self, pid: int, fd: int) -> None:
        self.pid, self.fd = pid, fd

    @classmethod
    def start(cls, src: Source) -> _Worker | None:
        if not _usable(src):
            return None
        read_end, write_end = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(read_end)
            os.close(write_end)
            return None
        if pid == 0:  # the worker: never returns into the caller's stack, never runs its exit handlers
            code = 1
            try:
                os.close(read_end)
                digest = _digest(src)
                payload = msgspec.msgpack.encode(digest)
                with os.fdopen(write_end, "wb") as out:
                    out.write(payload)
                code = 0
            except BaseException:  # noqa: BLE001 - any failure: the parent reads no digest and decodes itself
                pass
            finally:
                os._exit(code)
        os.close(write_end)
        return cls(pid, read_end)

    def result(self) -> IndexDigest | None:
        chunks = []
        while chunk := os.read(self.fd, 1 << 20):
            chunks.append(chunk)
        try:
            return msgspec.msgpack.decode(b"".join(chunks), type=IndexDigest | None)
        except msgspec.DecodeError:  # the worker failed before writing (or mid-way): no digest
            return None

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:  # already reaped (SIGCHLD ignored by the embedding process)
                pass
