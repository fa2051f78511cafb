"""Hub access for `onboard inspect`, only through huggingface_hub (its endpoint, token, offline switch and cache).

* `resolve_repo`: one `model_info(files_metadata=True)` call gives the commit sha and every file with its size.
* `download`: small files (config, tokenizer, index, chat template, .py) through `hf_hub_download` into the HF
  cache. Never weights.
* `header_of`: one safetensors header with HTTP range requests over huggingface_hub's own session and auth
  headers; the Source runs one per shard, all at once (up to 128 threads, not huggingface_hub's 6). The first range is
  sized from the index so that one request per shard is the common case; a second one fetches only the rest.

Headers and listings are immutable per commit, so they are cached next to the HF cache (`$ONBOARD_CACHE` or
`<HF_HUB_CACHE>/../onboard`): with HF_HUB_OFFLINE=1 everything inspected once online is inspected again offline.
Environment variables are read at call time (huggingface_hub reads HF_ENDPOINT and HF_HUB_OFFLINE at import).
"""

from __future__ import annotations

import json
import os
import re
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from onboard.errors import CheckpointError, HubError, OnboardError, SourceNotFound
from onboard.inspect_checkpoint.checkpoint_types import RepoFile, SafetensorsHeader
from onboard.inspect_checkpoint.safetensors_header import PREFIX_LEN, check_header_len, parse_header

FIRST_RANGE = 100_000  # bytes asked for first, at least: the whole header of most shards
MAX_FIRST_RANGE = 4_000_000
INDEX_FILE = "model.safetensors.index.json"
MAX_WORKERS = 128
RETRY_DELAYS: tuple[float, ...] = (0.25, 1.0, 2.0)  # after each failed try on 5xx / 429 / network errors
TIMEOUT_S = float(os.environ.get("ONBOARD_HUB_TIMEOUT", "30"))
_RETRY_STATUS = {408, 429, 500, 502, 503, 504}
_SHA_RE = re.compile(r"[0-9a-f]{40}")
T = TypeVar("T")


def endpoint() -> str:
    from huggingface_hub import constants

    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def offline() -> bool:
    from huggingface_hub import constants

    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE")
    return constants.HF_HUB_OFFLINE if value is None else value.upper() in {"1", "ON", "YES", "TRUE"}


def hf_cache_dir() -> Path:
    from huggingface_hub import constants

    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    return Path(constants.HF_HUB_CACHE)


def onboard_cache_dir() -> Path:
    return (
        Path(os.environ["ONBOARD_CACHE"]).expanduser()
        if os.environ.get("ONBOARD_CACHE")
        else hf_cache_dir().parent / "onboard"
    )


class ByteCounter:
    """Bytes received from the hub (bodies), shared by the worker threads."""

    def __init__(self) -> None:
        self.value = 0
        self._lock = threading.Lock()

    def add(self, n: int) -> None:
        with self._lock:
            self.value += n


# -- resolving a repo ------------------------------------------------------------------------------------------------


def resolve_repo(repo_id: str, revision: str | None) -> tuple[str, tuple[RepoFile, ...]]:
    """(commit sha, every file with its size) for `repo_id` at `revision` (default branch when None)."""
    if offline():
        return _resolve_offline(repo_id, revision)
    from huggingface_hub import HfApi

    api = HfApi(endpoint=endpoint(), library_name="onboard")
    what = f"hub repo {repo_id!r}" + (f" at revision {revision!r}" if revision else "")
    info = with_retries(
        lambda: api.model_info(repo_id, revision=revision, files_metadata=True, timeout=TIMEOUT_S), what
    )
    if not info.sha:
        raise HubError(f"{what}: the hub did not report a commit sha", "retry; if it persists, pass --revision <sha>")
    files = tuple(RepoFile(s.rfilename, s.size) for s in info.siblings or ())
    _save_listing(repo_id, revision, info.sha, files)
    return info.sha, files


def _repo_cache(repo_id: str) -> Path:
    return onboard_cache_dir() / "repos" / repo_id.replace("/", "--")


def _save_listing(repo_id: str, revision: str | None, sha: str, files: tuple[RepoFile, ...]) -> None:
    root = _repo_cache(repo_id)
    _atomic_write(root / f"{sha}.json", json.dumps([[f.path, f.size] for f in files]).encode())
    _atomic_write(root / "refs" / _ref_name(revision), sha.encode())


def _ref_name(revision: str | None) -> str:
    return (revision or "main").replace("/", "--")


def _resolve_offline(repo_id: str, revision: str | None) -> tuple[str, tuple[RepoFile, ...]]:
    hint = "run the same command once with network access (it caches what it reads), or unset HF_HUB_OFFLINE"
    sha = revision if revision and _SHA_RE.fullmatch(revision) else None
    for ref in (_repo_cache(repo_id) / "refs" / _ref_name(revision),
                hf_cache_dir() / f"models--{repo_id.replace('/', '--')}" / "refs" / (revision or "main")):  # fmt: skip
        if sha is None and ref.is_file():
            sha = ref.read_text().strip()
    if sha is None:
        raise SourceNotFound(
            f"hub repo {repo_id!r} (revision {revision or 'main'}) is not in the cache and HF_HUB_OFFLINE=1", hint
        )
    listing = _repo_cache(repo_id) / f"{sha}.json"
    if listing.is_file():
        return sha, tuple(RepoFile(p, s) for p, s in json.loads(listing.read_text()))
    snapshot = hf_cache_dir() / f"models--{repo_id.replace('/', '--')}" / "snapshots" / sha
    if snapshot.is_dir():  # downloaded by other tools: list what is there
        files = sorted(p for p in snapshot.rglob("*") if p.is_file())
        return sha, tuple(RepoFile(p.relative_to(snapshot).as_posix(), p.stat().st_size) for p in files)
    raise SourceNotFound(f"the file listing of {repo_id!r} at {sha} is not in the cache and HF_HUB_OFFLINE=1", hint)


# -- small files ------------------------------------------------------------------------------------------------------


def download(repo_id: str, sha: str, filename: str) -> Path | None:
    """Local path of a small repo file (downloaded into the HF cache); None when the repo has no such file."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError

    is_offline = offline()

    def call() -> str:
        return hf_hub_download(
            repo_id, filename, revision=sha, cache_dir=hf_cache_dir(), endpoint=endpoint(),
            local_files_only=is_offline, etag_timeout=TIMEOUT_S,
        )  # fmt: skip

    try:
        return Path(with_retries(call, f"{filename} of hub repo {repo_id!r}"))
    except OnboardError as exc:
        cause = exc.__cause__
        if isinstance(cause, LocalEntryNotFoundError) and is_offline:
            raise SourceNotFound(
                f"{filename} of {repo_id!r} ({sha[:12]}) is not in the cache and HF_HUB_OFFLINE=1",
                "run the same command once with network access, or unset HF_HUB_OFFLINE",
            ) from cause
        if isinstance(cause, EntryNotFoundError):
            return None
        raise


# -- safetensors headers ----------------------------------------------------------------------------------------------


def first_range_for(files: tuple[RepoFile, ...]) -> int:
    """How many bytes to ask for first so that one request usually holds a whole header.

    A header spends ~1.3x the bytes per tensor of the index's weight_map entry, so the index size (known from the
    listing) over the shard count estimates a shard's header; 1.5x that covers shards with more tensors than
    average. Huge MoE checkpoints (DeepSeek-V3: ~120 KB per shard) then need one request per shard, not two.
    """
    shards = sum(1 for f in files if f.path.endswith(".safetensors") and "/" not in f.path)
    index_size = next((f.size for f in files if f.path == INDEX_FILE), None)
    if not shards or not index_size:
        return FIRST_RANGE
    return min(MAX_FIRST_RANGE, max(FIRST_RANGE, index_size * 3 // 2 // shards + 8192))


def _header_cache_path(repo_id: str, sha: str, name: str) -> Path:
    return _repo_cache(repo_id) / "headers" / sha / (name + ".header")


def header_of(
    repo_id: str, sha: str, name: str, size: int | None, counter: ByteCounter, first_range: int = FIRST_RANGE
) -> SafetensorsHeader:
    """One shard's header: from the header cache, else one or two range requests (then cached)."""
    return parse_header_blob(name, header_bytes_of(repo_id, sha, name, size, counter, first_range), size)


def header_bytes_of(
    repo_id: str, sha: str, name: str, size: int | None, counter: ByteCounter, first_range: int = FIRST_RANGE
) -> bytes:
    """Prefix + header bytes of one shard (cache, else network). Pure I/O: worker threads run this and leave the
    parsing to the caller, so 100 workers do not fight over the GIL while new ones are still starting."""
    if name.startswith("/") or ".." in name.split("/"):
        raise CheckpointError("path-traversal", f"{name}: path leaves the repo", "fix the index's weight_map", name)
    cached = _header_cache_path(repo_id, sha, name)
    if cached.is_file():
        return cached.read_bytes()
    if offline():
        raise SourceNotFound(
            f"the safetensors header of {name} ({repo_id} at {sha[:12]}) is not cached and HF_HUB_OFFLINE=1",
            "run the same command once with network access, or unset HF_HUB_OFFLINE",
        )
    from huggingface_hub.errors import EntryNotFoundError

    try:
        blob = _fetch_header_bytes(repo_id, sha, name, size, counter, first_range)
    except SourceNotFound as exc:
        if isinstance(exc.__cause__, EntryNotFoundError):
            raise CheckpointError("missing-shard", f"{name}: not found in {repo_id} at {sha[:12]}", None, name) from exc
        raise
    _atomic_write(cached, blob)
    return blob


def parse_header_blob(name: str, blob: bytes, size: int | None) -> SafetensorsHeader:
    if len(blob) < PREFIX_LEN:
        raise CheckpointError("truncated", f"{name}: file is {len(blob)} bytes, too short for a header", None, name)
    (header_len,) = struct.unpack("<Q", blob[:PREFIX_LEN])
    return parse_header(name, header_len, blob[PREFIX_LEN:], size)


def _fetch_header_bytes(
    repo_id: str, sha: str, name: str, size: int | None, counter: ByteCounter, first_range: int = FIRST_RANGE
) -> bytes:
    """Prefix + header: one range request, a second only for the rest of a longer header."""
    url = f"{endpoint()}/{repo_id}/resolve/{sha}/{name}"
    first_end = first_range - 1 if size is None else min(first_range, size) - 1
    if first_end < 0:
        raise CheckpointError("truncated", f"{name}: file is empty", None, name)
    blob = _get_range(url, 0, first_end, f"{name} of hub repo {repo_id!r}", counter)
    if len(blob) < PREFIX_LEN:
        raise CheckpointError("truncated", f"{name}: file is {len(blob)} bytes, too short for a header", None, name)
    (header_len,) = struct.unpack("<Q", blob[:PREFIX_LEN])
    check_header_len(name, header_len, size)  # before asking for (and allocating) a huge claimed header
    need = PREFIX_LEN + header_len
    if len(blob) < need:
        blob += _get_range(url, len(blob), need - 1, f"{name} of hub repo {repo_id!r}", counter)
    return blob[:need]


def _get_range(url: str, start: int, end: int, what: str, counter: ByteCounter) -> bytes:
    from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

    headers = build_hf_headers(library_name="onboard", headers={"Range": f"bytes={start}-{end}"})
    want = end - start + 1

    def call() -> bytes:
        # Stream and stop at `want` bytes: a server that ignores Range must not make us read a 5 GB shard.
        with get_session().stream("GET", url, headers=headers, timeout=TIMEOUT_S) as response:
            if response.status_code >= 400:
                response.read()
                hf_raise_for_status(response)
            chunks, got = [], 0
            skip = start if response.status_code == 200 else 0  # full body: drop what precedes the range
            for chunk in response.iter_bytes():
                counter.add(len(chunk))
                if skip:
                    cut = min(skip, len(chunk))
                    chunk, skip = chunk[cut:], skip - cut
                chunks.append(chunk)
                got += len(chunk)
                if got >= want:
                    break
            return b"".join(chunks)[:want]

    return with_retries(call, what)


# -- errors and retries -----------------------------------------------------------------------------------------------


def with_retries(call: Callable[[], T], what: str) -> T:
    """Run a hub call, retrying 5xx/429/timeouts/dropped connections; map every failure to an OnboardError."""
    for attempt in range(len(RETRY_DELAYS) + 1):
        try:
            return call()
        except Exception as exc:  # noqa: BLE001 - classified below, anything unknown re-raised
            if not _retryable(exc) or attempt == len(RETRY_DELAYS):
                mapped = map_hub_error(exc, what, attempts=attempt + 1)
                if mapped is None:
                    raise
                raise mapped from exc
            time.sleep(RETRY_DELAYS[attempt])
    raise AssertionError("unreachable")


def _status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


def _retryable(exc: BaseException) -> bool:
    import httpx2

    if isinstance(exc, (httpx2.TimeoutException, httpx2.NetworkError, httpx2.RemoteProtocolError)):
        return True
    return _status(exc) in _RETRY_STATUS


def map_hub_error(exc: BaseException, what: str, attempts: int = 1) -> OnboardError | None:
    """A clean OnboardError (message naming the repo/file, plus a hint) for a huggingface_hub / httpx failure."""
    import httpx2
    from huggingface_hub import errors as e

    host = endpoint()
    tries = f" after {attempts} tries" if attempts > 1 else ""
    if isinstance(exc, OnboardError):
        return exc
    if isinstance(exc, e.GatedRepoError):
        return HubError(f"{what} is gated: your token has no access",
                        "accept the model's licence on its hub page, then set HF_TOKEN (or `hf auth login`)")  # fmt: skip
    if isinstance(exc, e.RepositoryNotFoundError):
        return SourceNotFound(f"{what} not found on {host}",
                              "check the repo id (org/name); a private repo needs HF_TOKEN; a local folder needs ./")  # fmt: skip
    if isinstance(exc, e.RevisionNotFoundError):
        return SourceNotFound(f"{what}: revision not found",
                              "use an existing branch, tag or 40-hex commit sha (see the repo's commit history)")  # fmt: skip
    if isinstance(exc, e.EntryNotFoundError):
        return SourceNotFound(f"{what}: file not found in the repo", "check the file name and the revision")
    if isinstance(exc, e.OfflineModeIsEnabled):
        return SourceNotFound(f"{what}: not in the cache and HF_HUB_OFFLINE=1",
                              "run once with network access, or unset HF_HUB_OFFLINE")  # fmt: skip
    status = _status(exc)
    if status in (401, 403):
        return HubError(f"{what}: access denied (HTTP {status})", "set HF_TOKEN to a token that can read this repo")
    if status is not None and status >= 500 or status == 429:
        return HubError(f"{what}: the hub ({host}) answered HTTP {status}{tries}",
                        "the hub is having trouble: retry later, or set HF_HUB_OFFLINE=1 to use the cache")  # fmt: skip
    if isinstance(exc, httpx2.TimeoutException):
        return HubError(f"{what}: no answer from {host} within {TIMEOUT_S:g} s{tries}",
                        "check the network (or HF_ENDPOINT); raise ONBOARD_HUB_TIMEOUT for slow links")  # fmt: skip
    if isinstance(exc, (httpx2.NetworkError, httpx2.RemoteProtocolError)):
        return HubError(f"{what}: connection to {host} failed or was dropped{tries} ({exc})",
                        "check the network and HF_ENDPOINT; set HF_HUB_OFFLINE=1 to use the cache")  # fmt: skip
    if isinstance(exc, e.HfHubHTTPError):
        return HubError(f"{what}: hub error HTTP {status}: {exc}".splitlines()[0], "retry later")
    return None


def _atomic_write(path: Path, data: bytes) -> None:
    """Write via a temp file + os.replace: concurrent inspects never see a half-written cache entry."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache only costs speed
