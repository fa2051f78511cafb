"""The shard index checked, and the last shards read, on a second core while this process reads the first ones.

A large checkpoint's model.safetensors.index.json is as long as all its headers together (9 MB for 93k tensors), and
decoding it and matching it against the headers took a fifth of `onboard inspect`. Where the process can fork
(Linux, one thread, a second CPU, the index at least FORK_FROM_BYTES), a forked worker decodes the index into a
digest: per shard, how many tensors it lists there and a hash of their names. Then the two share the headers: this
process reads shards from the front of the folder's sorted list, the worker from the back, each claiming the next
under a lock they share, until they meet. The worker groups the tensors of its shards (TensorIndex) and sends back
the digest, what each of its shards holds (count and name hash) and its part of the index; this process groups its
own shards meanwhile and puts the two parts together.

Equal everywhere means integrity's index checks would find nothing (each shard holds exactly the tensors the index
gives it, no listed shard is missing, no top-level shard is unlisted), so the index is not decoded again and the
worker's shards are not read again. Anything else (a difference, a header the worker could not read, an index it
does not take as usual, the worker failing) and this process reads the worker's shards and decodes the index itself:
integrity then reports exactly what it always did. The fast path only ever skips work that finds nothing. Either way
the shards are grouped in sorted order, the worker's after this process's.

The hash is Python's hash of the set of names. String hashes are keyed with a random secret per process, which the
forked worker shares, so two different name sets match with a chance of about 2**-64 and a file cannot be built to
match on purpose; with hash randomization off (PYTHONHASHSEED=0) the worker is not used. `ONBOARD_INSPECT_FORK=0`
turns it off.
"""

from __future__ import annotations

import mmap
import os
import struct
import sys
from collections.abc import Iterable
from typing import NamedTuple

import msgspec

from onboard.errors import CheckpointError
from onboard.inspect_checkpoint.checkpoint_types import SafetensorsHeader
from onboard.inspect_checkpoint.source import INDEX_FILE, LocalSource, Source, is_safe_relpath, is_top_level_shard
from onboard.inspect_checkpoint.tensor_index import IndexPart, TensorIndex

FORK_FROM_BYTES = 2 << 20  # below this the index decodes faster than a fork and a pipe round trip
# A fork copies the page tables: ~1 ms for the CLI's ~60 MB, but tens of ms for a process holding gigabytes (a
# pipeline with a model loaded), more than the worker saves.
FORK_MAX_RSS = 1 << 30
# Reading a shard's header costs about twice what grouping its tensors does afterwards (163 shards: 65 and 33 ms).
# Each process groups its own part once the reading is done, so this one, which started reading first, stops
# claiming while enough shards are left to keep the worker reading until its own grouping ends: with `a` and `b`
# shards claimed by each, when the unclaimed ones are at most (a - b) × GROUP_SHARE. Grouping's share of the work
# would make it 1/3; handing the worker's part over (encode, copy, decode) comes after, so the worker is left a little
# less: 1/4 measured best (benchmarks/bench_inspect_local.py's checkpoint, 1/5 to 2/5 tried).
GROUP_SHARE = 1 / 4
Headers = dict[str, SafetensorsHeader | CheckpointError]
# Per shard, what the index lists there: how many tensors, a hash of their names in the index's order, and a hash of
# the set of them. A header lists the same names in the same order when its writer sorted them by name (as
# safetensors does within a dtype), and hashing a tuple costs a tenth of building a set: the set is hashed only
# when the order differs (shards mixing dtypes).
Listed = dict[str, tuple[int, int, int]]
_SLOTS = struct.Struct("qq")  # the claims: next position from the front, one past the next from the back


class IndexDigest(msgspec.Struct, array_like=True):
    names: Listed


class WorkerResult(msgspec.Struct, array_like=True):
    digest: IndexDigest | None  # None: the index is not the usual kind, this process judges it
    first: int  # the first position the worker read (the list's length if none)
    held: bool  # each shard the worker read holds what the index lists for it
    part: IndexPart | None  # its shards' tensors, grouped; None where it read none or one failed


class ShardHeaders(NamedTuple):
    shards: list[str]  # what inspect reads, sorted (the index's shards, else the top-level files)
    # Each header read in this process, or the error met reading it: every shard's, except where the worker's part
    # was used (the index matched), whose shards are in `tensors` only.
    headers: Headers
    index_matches: bool  # the worker's digest matched every header: integrity need not decode the index
    tensors: TensorIndex | None  # every readable shard's tensors, grouped (None: no header could be read)


def read_shard_headers(src: Source) -> ShardHeaders:
    """The shards' headers and grouped tensors, shared with a second core where that pays."""
    worker = _Worker.start(src)
    if worker is None:
        shards = src.safetensors_files()
        headers = src.read_headers(shards) if shards else {}
        return ShardHeaders(shards, headers, False, _grouped(headers.values()))
    shards = worker.shards
    try:
        headers: Headers = {}
        while (i := worker.claims.front()) is not None:
            headers.update(src.read_headers([shards[i]]))
        mine = _grouped(headers.values())  # while the worker groups its part
        result = worker.result()
    finally:
        worker.close()
    if result is not None and _fits(result, shards, headers):
        try:
            theirs = TensorIndex.from_part(result.part) if result.part is not None else None
        except ValueError:  # a part that does not add up: its shards are read here, as below
            pass
        else:
            parts = [p for p in (mine, theirs) if p is not None]
            return ShardHeaders(shards, headers, True, TensorIndex.concat(parts) if parts else None)
    shards = src.safetensors_files()  # the worker's shards read here and the index judged here, as without it
    headers.update(src.read_headers([s for s in shards if s not in headers]))
    ordered = {s: headers[s] for s in shards}
    return ShardHeaders(shards, ordered, False, _grouped(ordered.values()))


def _fits(result: WorkerResult, shards: list[str], headers: Headers) -> bool:
    """The worker read the shards after this process's (all of them, or it read none), and the index lists exactly
    the folder's shards, each holding what the index lists for it."""
    read_rest = result.part is not None or result.first == len(shards)
    return (
        result.digest is not None and result.first == len(headers) and read_rest
        and result.held and _holds(result.digest, headers, shards[: len(headers)], everything=shards)
    )  # fmt: skip


def _grouped(headers: Iterable[SafetensorsHeader | CheckpointError]) -> TensorIndex | None:
    good = [h for h in headers if isinstance(h, SafetensorsHeader)]
    return TensorIndex.from_headers(good) if good else None


def _holds(digest: IndexDigest, headers: Headers, shards: list[str], everything: list[str] | None = None) -> bool:
    """The index lists exactly `everything` (default: `shards`), and each of `shards` holds what it lists there."""
    listed = digest.names
    if listed.keys() != set(everything if everything is not None else shards):
        return False
    for shard in shards:
        h = headers.get(shard)
        if not isinstance(h, SafetensorsHeader):
            return False
        count, in_order, as_set = listed[shard]
        names = h.tensors
        if len(names) != count or (hash(tuple(names)) != in_order and hash(frozenset(names)) != as_set):
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
    return IndexDigest({s: (len(names), hash(tuple(names)), hash(frozenset(names))) for s, names in by_shard.items()})


def _work(src: Source, shards: list[str], claims: _Claims) -> WorkerResult:
    """In the worker: the digest, then the shards claimed from the back, grouped."""
    digest = _digest(src)
    if digest is None:  # this process reads everything and judges the index
        return WorkerResult(digest, len(shards), False, None)
    first = len(shards)
    headers: Headers = {}
    while (i := claims.back()) is not None:
        headers.update(src.read_headers([shards[i]]))
        first = i
    mine = shards[first:]
    if not mine:  # this process read them all
        return WorkerResult(digest, first, True, None)
    if not all(isinstance(headers[s], SafetensorsHeader) for s in mine):  # this process reads it again and reports it
        return WorkerResult(digest, first, False, None)
    part = TensorIndex.from_headers([headers[s] for s in mine])  # type: ignore[misc]
    held = _holds(digest, headers, mine, everything=shards)
    return WorkerResult(digest, first, held, part.to_part())


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


class _Claims:
    """Positions in the shard list handed out from both ends, under a lock the two processes share: a POSIX record
    lock on a memfd, which the kernel releases if its holder dies (a token in a pipe would die with it)."""

    def __init__(self, n: int) -> None:
        import fcntl  # POSIX only; the worker runs on Linux alone

        self._lockf, self._exclusive, self._unlock = fcntl.lockf, fcntl.LOCK_EX, fcntl.LOCK_UN
        self.n = n
        self.fd = os.memfd_create("onboard-claims", os.MFD_CLOEXEC)
        try:
            os.ftruncate(self.fd, _SLOTS.size)
            self.mem = mmap.mmap(self.fd, _SLOTS.size)  # shared: the forked worker sees this process's writes
        except OSError:
            os.close(self.fd)
            raise
        _SLOTS.pack_into(self.mem, 0, 0, n)

    def front(self) -> int | None:
        """The next position from the front, or None: all claimed, or the rest left to the worker (GROUP_SHARE)."""
        self._lockf(self.fd, self._exclusive)
        try:
            lo, hi = _SLOTS.unpack_from(self.mem)
            if lo >= hi or hi - lo <= (lo - (self.n - hi)) * GROUP_SHARE:
                return None
            _SLOTS.pack_into(self.mem, 0, lo + 1, hi)
            return lo
        finally:
            self._lockf(self.fd, self._unlock)

    def back(self) -> int | None:
        """The next position from the back, or None once every position is claimed."""
        self._lockf(self.fd, self._exclusive)
        try:
            lo, hi = _SLOTS.unpack_from(self.mem)
            if lo >= hi:
                return None
            _SLOTS.pack_into(self.mem, 0, lo, hi - 1)
            return hi - 1
        finally:
            self._lockf(self.fd, self._unlock)

    def put(self, payload: bytes) -> None:
        """In the worker: its result, after the claims. A 2 MB result through a pipe would go 64 KB at a time, each
        waiting for this process to read; in the shared file it is written while this process still works."""
        os.ftruncate(self.fd, _SLOTS.size + len(payload))
        written = 0
        while written < len(payload):
            written += os.pwrite(self.fd, memoryview(payload)[written:], _SLOTS.size + written)

    def get(self) -> memoryview:
        """The worker's result, mapped rather than copied: the part's buffers decode as views into it."""
        mapped = mmap.mmap(self.fd, os.fstat(self.fd).st_size, access=mmap.ACCESS_READ)
        return memoryview(mapped)[_SLOTS.size :]

    def close(self) -> None:
        self.mem.close()
        os.close(self.fd)


class _Worker:
    def __init__(self, pid: int, fd: int, shards: list[str], claims: _Claims) -> None:
        self.pid, self.fd, self.shards, self.claims = pid, fd, shards, claims

    @classmethod
    def start(cls, src: Source) -> _Worker | None:
        if not _usable(src):
            return None
        shards = src.top_level_shards()
        try:
            claims = _Claims(len(shards))
        except OSError:
            return None
        read_end, write_end = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(read_end)
            os.close(write_end)
            claims.close()
            return None
        if pid == 0:  # the worker: never returns into the caller's stack, never runs its exit handlers
            code = 1
            try:
                os.close(read_end)
                claims.put(msgspec.msgpack.encode(_work(src, shards, claims)))
                os.write(write_end, b"\n")  # done: read at once (the end of the pipe comes after the exit unmaps)
                code = 0
            except BaseException:  # noqa: BLE001 - any failure: the parent reads no result and does the work
                pass
            finally:
                os._exit(code)
        os.close(write_end)
        return cls(pid, read_end, shards, claims)

    def result(self) -> WorkerResult | None:
        """What the worker found, or None if it failed (this process then does its work)."""
        if os.read(self.fd, 1) != b"\n":  # the end of the pipe: it ended without saying it was done
            return None
        try:
            return msgspec.msgpack.decode(self.claims.get(), type=WorkerResult)
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            return None

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
            self.claims.close()
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:  # already reaped (SIGCHLD ignored by the embedding process)
                pass
