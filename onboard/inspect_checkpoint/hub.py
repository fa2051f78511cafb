"""Hub access for `onboard inspect`, only through huggingface_hub (its endpoint, token, offline switch, session,
backoff and cache).

* `list_repo`: one model-info request (with file sizes) gives the commit sha and every file: a `RepoListing`, made
  once per run and passed down (new-model names its run folder with it, inspect reads from it).
* `fetch_file`: a small file (config, tokenizer, index, chat template, .py; never weights) in a single GET into
  onboard's cache, immutable per commit (hf_hub_download would send a HEAD first: a round trip more on the critical
  path, since the index sizes the header requests). `download` (hf_hub_download) finds files in huggingface_hub's
  cache offline, and fetches a file whose size the listing does not give. config.json and the index are asked for
  at the revision while the listing is on its way (`_speculate`), and used once the listing names the same commit:
  listing and index cost one round trip, not two.
* `get_range`: bytes of one file with a range request (streamed, cut at the range's end if the server ignores it);
  the safetensors headers of every shard are read with it (hub_headers.py: ranges sized from the index), at most
  `concurrency()` requests in flight.
* Every request of ours, and every retry, goes through huggingface_hub's `http_backoff` / `http_stream_backoff`
  (`request_headers` and `backoff_settings` give its auth headers and settings, `mapped_error` our errors): 5xx, 429
  and dropped connections are retried with exponential backoff, and a `Retry-After` (429 or 503) is waited out. The
  exception: the speculative GETs, not retried (a miss falls back to the normal GET, retried).

Listings, small files and headers are immutable per commit, so they are cached next to the HF cache
(`$ONBOARD_CACHE` or `<HF_HUB_CACHE>/../onboard`; the headers as one pack per commit, header_pack.py): with
HF_HUB_OFFLINE=1 everything inspected once online is inspected again offline.
Environment variables are read at call time (huggingface_hub reads HF_ENDPOINT and HF_HUB_OFFLINE at import).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar
from urllib.parse import quote

import msgspec

from onboard import serde
from onboard.checkpoint_id import COMMIT_SHA, is_commit_sha
from onboard.errors import HubError, InputError, OnboardError, SourceNotFound
from onboard.fsutil import atomic_write
from onboard.inspect_checkpoint.checkpoint_types import RepoFile, RepoListing
from onboard.retry_after import retry_after_seconds

if TYPE_CHECKING:
    from concurrent.futures import Future

INDEX_FILE = "model.safetensors.index.json"
RETRIES = 3  # after the first try, on 5xx / 429 / timeouts / dropped connections
RETRY_BASE_S = 0.25  # first backoff wait, doubled each retry (huggingface_hub's http_backoff); Retry-After wins
TIMEOUT_S = float(os.environ.get("ONBOARD_HUB_TIMEOUT", "30"))
CONCURRENCY_ENV = "ONBOARD_HUB_CONCURRENCY"
# Requests in flight at once, a connection each: a modest pool, not a connection per shard. A burst of ~100 connects
# overflows a small server's listen backlog (5 in Python's http.server and many proxies), and each connect dropped
# waits for TCP's SYN retry; 16 still reads ~160 shards in about ten round trips.
DEFAULT_CONCURRENCY = 16
RETRY_STATUS = (408, 429, 500, 502, 503, 504)
# Files every inspect reads first, asked for at the revision while the listing is still on its way (their commit is
# checked against the listing's sha before use): the index sizes the header requests, so it is on the critical path.
SPECULATIVE_FILES = ("config.json", INDEX_FILE)
SPECULATIVE_LIMIT = 64 * 2**20  # bytes; a larger answer is dropped and left to the normal GET
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


# -- listing a repo ---------------------------------------------------------------------------------------------------


def list_repo(repo_id: str, revision: str | None, *, speculate: bool = True) -> RepoListing:
    """The commit sha and every file with its size for `repo_id` at `revision` (default branch when None).

    `speculate`: also ask for SPECULATIVE_FILES (config.json, the index) alongside the listing, for a caller that
    will read them (inspect, new-model); a caller that will not (verify-tokenizer) passes False.

    A commit's files never change: asked by its 40-hex sha, a listing cached earlier (this run's, or any before) is
    used without asking the hub, so the stages after new-model's first listing (they all pass the resolved sha)
    do not list the repo again. A branch or tag can move, so it is always asked for online."""
    if offline() or (revision and is_commit_sha(revision) and (repo_cache(repo_id) / f"{revision}.json").is_file()):
        return _resolve_offline(repo_id, revision)
    if speculate:
        _speculate(repo_id, revision)
    what = f"hub repo {repo_id!r}" + (f" at revision {revision!r}" if revision else "")
    url = f"{endpoint()}/api/models/{repo_id}" + (f"/revision/{quote(revision, safe='')}" if revision else "")
    response = _request("GET", url, what, params={"blobs": True})  # blobs: file sizes (what model_info sends)
    info = serde.decode_json(response.content, _ModelInfo, f"{what}: the hub's model info", _BAD_ANSWER, HubError)
    if not info.sha:
        raise HubError(f"{what}: the hub did not report a commit sha", "retry; if it persists, pass --revision <sha>")
    listing = RepoListing(repo_id, revision, info.sha, tuple(RepoFile(s.rfilename, s.size) for s in info.siblings))
    _save_listing(listing)
    return listing


class _Sibling(msgspec.Struct):
    rfilename: str
    size: Annotated[int, msgspec.Meta(ge=0)] | None = None


class _ModelInfo(msgspec.Struct):
    """The fields of the hub's model info that a listing reads. The commit sha goes into URLs and cache paths, so it
    must be one; a malformed answer (a mirror or proxy that is not the hub) is a HubError naming the field."""

    sha: Annotated[str, msgspec.Meta(pattern=f"^{COMMIT_SHA.pattern}$")] | None = None
    siblings: list[_Sibling] = []


_BAD_ANSWER = "the endpoint (HF_ENDPOINT) does not answer as the hub does: check it, or retry later"


def repo_cache(repo_id: str) -> Path:
    return onboard_cache_dir() / "repos" / repo_id.replace("/", "--")


def _save_listing(listing: RepoListing) -> None:
    root = repo_cache(listing.repo_id)
    cache_write(root / f"{listing.sha}.json", json.dumps([[f.path, f.size] for f in listing.files]).encode())
    cache_write(root / "refs" / _ref_name(listing.revision), listing.sha.encode())


def _ref_name(revision: str | None) -> str:
    return (revision or "main").replace("/", "--")


def _resolve_offline(repo_id: str, revision: str | None) -> RepoListing:
    hint = "run the same command once with network access (it caches what it reads), or unset HF_HUB_OFFLINE"
    sha = revision if revision and is_commit_sha(revision) else None
    for ref in (
        repo_cache(repo_id) / "refs" / _ref_name(revision),
        hf_cache_dir() / f"models--{repo_id.replace('/', '--')}" / "refs" / (revision or "main"),
    ):
        if sha is None and ref.is_file():
            sha = ref.read_text().strip()
    if sha is None:
        raise SourceNotFound(
            f"hub repo {repo_id!r} (revision {revision or 'main'}) is not in the cache and HF_HUB_OFFLINE=1", hint
        )
    listing = repo_cache(repo_id) / f"{sha}.json"
    if listing.is_file():
        return RepoListing(repo_id, revision, sha, tuple(RepoFile(p, s) for p, s in json.loads(listing.read_text())))
    snapshot = hf_cache_dir() / f"models--{repo_id.replace('/', '--')}" / "snapshots" / sha
    if snapshot.is_dir():  # downloaded by other tools: list what is there
        files = sorted(p for p in snapshot.rglob("*") if p.is_file())
        return RepoListing(
            repo_id, revision, sha, tuple(RepoFile(p.relative_to(snapshot).as_posix(), p.stat().st_size) for p in files)
        )
    raise SourceNotFound(f"the file listing of {repo_id!r} at {sha} is not in the cache and HF_HUB_OFFLINE=1", hint)


# -- small files ------------------------------------------------------------------------------------------------------


def download(repo_id: str, sha: str, filename: str) -> Path | None:
    """Local path of a small repo file (downloaded into the HF cache); None when the repo has no such file."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError

    is_offline = offline()

    def call() -> str:
        return hf_hub_download(
            repo_id,
            filename,
            revision=sha,
            cache_dir=hf_cache_dir(),
            endpoint=endpoint(),
            local_files_only=is_offline,
            etag_timeout=TIMEOUT_S,
        )

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


def fetch_file(repo_id: str, sha: str, name: str, size: int | None, counter: ByteCounter) -> Path | None:
    """One whole (small) file in a single GET, cached in onboard's cache (immutable per commit); None when the hub
    does not have it. Offline, or when the listing gives no size: huggingface_hub's cache and `download`."""
    cached = repo_cache(repo_id) / "files" / sha / name
    if cached.is_file():
        return cached
    if offline() or not size:
        return download(repo_id, sha, name)
    from huggingface_hub.errors import EntryNotFoundError

    url = f"{endpoint()}/{repo_id}/resolve/{sha}/{name}"
    what = f"{name} of hub repo {repo_id!r}"
    data = _claim_speculative(repo_id, sha, name, size)
    try:
        if data is None:
            data = get_range(url, 0, size - 1, what, counter)
        else:
            counter.add(len(data))
    except SourceNotFound as exc:
        if isinstance(exc.__cause__, EntryNotFoundError):
            return None
        raise
    if len(data) != size:  # never cache a short read as the file
        raise HubError(f"{what}: the hub sent {len(data):,} of its {size:,} bytes", "retry; the connection was cut")
    cache_write(cached, data)
    return cached if cached.is_file() else _write_temp(cached, data)


# -- speculative GETs alongside the listing ---------------------------------------------------------------------------

_speculative: dict[tuple[str, str, str], Future[tuple[str, bytes] | None]] = {}
_speculative_lock = threading.Lock()


def _speculate(repo_id: str, revision: str | None) -> None:
    """Ask for SPECULATIVE_FILES at `revision` now, in background threads, so they arrive with the listing instead of
    a round trip after it. Only this listing's are kept (an unclaimed 9 MB index is dropped by the next listing); they
    stay in memory until `fetch_file` claims them for the listed commit, so nothing reaches the cache unasked."""
    from concurrent.futures import Future

    base = f"{endpoint()}/{repo_id}/resolve/{quote(revision or 'main', safe='')}/"
    with _speculative_lock:
        _speculative.clear()
        for name in SPECULATIVE_FILES:
            fut: Future[tuple[str, bytes] | None] = Future()
            _speculative[(endpoint(), repo_id, name)] = fut
            threading.Thread(
                target=_speculative_get, args=(base + name, fut), name="onboard-hub-speculative", daemon=True
            ).start()


def _speculative_get(url: str, fut: Future[tuple[str, bytes] | None]) -> None:
    """(commit, body) of one whole file, or None on any failure or surprise: a miss only costs the normal GET (with
    its retries), so this one is not retried."""
    from huggingface_hub.utils import http_stream_backoff

    result = None
    try:
        with http_stream_backoff(
            "GET", url, headers=request_headers(), timeout=TIMEOUT_S, **{**backoff_settings(), "max_retries": 0}
        ) as response:
            commits = [r.headers.get("X-Repo-Commit") for r in (*response.history, response)]
            commit = next((c for c in commits if c), None)
            if response.status_code == 200 and commit:
                chunks, got = [], 0
                for chunk in response.iter_bytes():
                    chunks.append(chunk)
                    got += len(chunk)
                    if got > SPECULATIVE_LIMIT:
                        break
                else:
                    result = (commit, b"".join(chunks))
    except Exception:  # noqa: BLE001, S110 - any failure leaves it to the normal GET, which reports it
        pass
    finally:
        fut.set_result(result)


def _claim_speculative(repo_id: str, sha: str, name: str, size: int) -> bytes | None:
    """The speculative body of `name` if it is the listed commit's file (same commit, listed size), once."""
    with _speculative_lock:
        fut = _speculative.pop((endpoint(), repo_id, name), None)
    if fut is None:
        return None
    result = fut.result()  # the GET has its own timeout
    if result is None or result[0] != sha or len(result[1]) != size:
        return None
    return result[1]


def _write_temp(path: Path, data: bytes) -> Path:
    """A read-only cache: the file still has to be read once, from a private temporary folder (under its own name,
    so callers that strip the name to find the repo's folder still can)."""
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix="onboard-hub-")) / path.name
    tmp.write_bytes(data)
    return tmp


def download_snapshot(listing: RepoListing, patterns: Sequence[str]) -> Path:
    """The listed files matching `patterns` (fnmatch on the path, as snapshot_download's allow_patterns) in
    huggingface_hub's cache, fetched as snapshot_download would but without listing the repo again; returns the
    snapshot folder. Weights included: this is for the stages that run the model, never for inspect."""
    from concurrent.futures import ThreadPoolExecutor
    from fnmatch import fnmatch

    names = [f.path for f in listing.files if any(fnmatch(f.path, p) for p in patterns)]
    if "config.json" not in names:
        raise SourceNotFound(
            f"hub repo {listing.repo_id!r} at {listing.sha[:12]} has no config.json",
            "point SOURCE at a transformers checkpoint repo",
        )
    with ThreadPoolExecutor(max_workers=8, thread_name_prefix="onboard-snapshot") as pool:  # snapshot_download's 8
        paths = dict(zip(names, pool.map(lambda name: download(listing.repo_id, listing.sha, name), names)))
    config = paths["config.json"]
    if config is None:
        raise SourceNotFound(f"config.json of {listing.repo_id!r} is listed but not on the hub", "retry later")
    return config.parent


def get_range(url: str, start: int, end: int, what: str, counter: ByteCounter) -> bytes:
    from huggingface_hub.utils import hf_raise_for_status, http_stream_backoff

    headers = request_headers(Range=f"bytes={start}-{end}")
    want = end - start + 1
    try:
        # Stream and stop at `want` bytes: a server that ignores Range must not make us read a 5 GB shard.
        with http_stream_backoff("GET", url, headers=headers, timeout=TIMEOUT_S, **backoff_settings()) as response:
            if response.status_code >= 400:
                response.read()
                hf_raise_for_status(response)
            chunks, got = [], 0
            skip_full = response.status_code == 200  # Range ignored: the whole file comes, stop after the range
            skip = start if skip_full else 0  # full body: drop what precedes the range
            for chunk in response.iter_bytes():
                counter.add(len(chunk))
                if skip:
                    cut = min(skip, len(chunk))
                    chunk, skip = chunk[cut:], skip - cut
                chunks.append(chunk)
                got += len(chunk)
                if got >= want and skip_full:  # a 206 body is read to its end: the connection then stays reusable
                    break
            return b"".join(chunks)[:want]
    except Exception as exc:  # noqa: BLE001 - mapped to a clean error below, anything unknown re-raised
        raise mapped_error(exc, what) from exc


# -- errors and retries -----------------------------------------------------------------------------------------------


def request_headers(**extra: str) -> dict[str, str]:
    """huggingface_hub's auth and user-agent headers (build_hf_headers), plus `extra`."""
    from huggingface_hub.utils import build_hf_headers

    return {**build_hf_headers(library_name="onboard"), **extra}


def concurrency() -> int:
    """Requests in flight at once: $ONBOARD_HUB_CONCURRENCY, else DEFAULT_CONCURRENCY."""
    raw = os.environ.get(CONCURRENCY_ENV, "").strip()
    if not raw:
        return DEFAULT_CONCURRENCY
    if not raw.isdigit() or int(raw) < 1:
        raise InputError(
            f"{CONCURRENCY_ENV}={raw!r} is not a positive whole number",
            f"set {CONCURRENCY_ENV} to the number of hub requests allowed in flight, e.g. 8, or unset it",
        )
    return int(raw)


def backoff_settings() -> dict[str, Any]:
    """huggingface_hub's backoff settings for our requests (read at call time: tests shorten RETRY_BASE_S)."""
    return {
        "max_retries": RETRIES,
        "base_wait_time": RETRY_BASE_S,
        "max_wait_time": 8.0,
        "retry_on_status_codes": RETRY_STATUS,
    }


def _request(method: str, url: str, what: str, **kwargs: Any) -> Any:
    """One request through huggingface_hub's session, auth headers and `http_backoff`; failures mapped."""
    from huggingface_hub.utils import hf_raise_for_status, http_backoff

    try:
        response = http_backoff(
            method, url, headers=request_headers(), timeout=TIMEOUT_S, **backoff_settings(), **kwargs
        )
        hf_raise_for_status(response)
        return response
    except Exception as exc:  # noqa: BLE001 - mapped to a clean error below, anything unknown re-raised
        raise mapped_error(exc, what) from exc


def mapped_error(exc: Exception, what: str) -> Exception:
    attempts = RETRIES + 1 if _retryable(exc) else 1  # the backoff gives up on a retryable error only when spent
    return map_hub_error(exc, what, attempts=attempts) or exc


def with_retries(call: Callable[[], T], what: str) -> T:
    """Run a huggingface_hub function (hf_hub_download) with the backoff our own requests get: RETRIES retries on
    5xx/429/timeouts/dropped connections, waits doubling from RETRY_BASE_S, a Retry-After header waited out."""
    for attempt in range(RETRIES + 1):
        try:
            return call()
        except Exception as exc:  # noqa: BLE001 - classified below, anything unknown re-raised
            if not _retryable(exc) or attempt == RETRIES:
                mapped = map_hub_error(exc, what, attempts=attempt + 1)
                if mapped is None:
                    raise
                raise mapped from exc
            time.sleep(max(RETRY_BASE_S * 2**attempt, _retry_after(exc)))
    raise AssertionError("unreachable")


def _retry_after(exc: BaseException) -> float:
    """Seconds a 429/503 answer asked us to wait (its Retry-After header), else 0."""
    return retry_after_seconds(getattr(getattr(exc, "response", None), "headers", None)) or 0.0


def _status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


def _retryable(exc: BaseException) -> bool:
    import httpx2  # huggingface_hub's HTTP client (a dependency of it, declared in pyproject: we catch its errors)

    if isinstance(exc, (httpx2.TimeoutException, httpx2.NetworkError, httpx2.RemoteProtocolError)):
        return True
    return _status(exc) in RETRY_STATUS


def map_hub_error(exc: BaseException, what: str, attempts: int = 1) -> OnboardError | None:
    """A clean OnboardError (message naming the repo/file, plus a hint) for a huggingface_hub / httpx failure."""
    import httpx2
    from huggingface_hub import errors as e

    host = endpoint()
    tries = f" after {attempts} tries" if attempts > 1 else ""
    if isinstance(exc, OnboardError):
        return exc
    if isinstance(exc, e.GatedRepoError):
        return HubError(
            f"{what} is gated: your token has no access",
            "accept the model's licence on its hub page, then set HF_TOKEN (or `hf auth login`)",
        )
    if isinstance(exc, e.RepositoryNotFoundError):
        return SourceNotFound(
            f"{what} not found on {host}",
            "check the repo id (org/name); a private repo needs HF_TOKEN; a local folder needs ./",
        )
    if isinstance(exc, e.RevisionNotFoundError):
        return SourceNotFound(
            f"{what}: revision not found",
            "use an existing branch, tag or 40-hex commit sha (see the repo's commit history)",
        )
    if isinstance(exc, e.EntryNotFoundError):
        return SourceNotFound(f"{what}: file not found in the repo", "check the file name and the revision")
    if isinstance(exc, e.OfflineModeIsEnabled):
        return SourceNotFound(
            f"{what}: not in the cache and HF_HUB_OFFLINE=1", "run once with network access, or unset HF_HUB_OFFLINE"
        )
    status = _status(exc)
    if status in (401, 403):
        return HubError(f"{what}: access denied (HTTP {status})", "set HF_TOKEN to a token that can read this repo")
    if status is not None and status >= 500 or status == 429:
        return HubError(
            f"{what}: the hub ({host}) answered HTTP {status}{tries}",
            "the hub is having trouble: retry later, or set HF_HUB_OFFLINE=1 to use the cache",
        )
    if isinstance(exc, httpx2.TimeoutException):
        return HubError(
            f"{what}: no answer from {host} within {TIMEOUT_S:g} s{tries}",
            "check the network (or HF_ENDPOINT); raise ONBOARD_HUB_TIMEOUT for slow links",
        )
    if isinstance(exc, (httpx2.NetworkError, httpx2.RemoteProtocolError)):
        return HubError(
            f"{what}: connection to {host} failed or was dropped{tries} ({exc})",
            "check the network and HF_ENDPOINT; set HF_HUB_OFFLINE=1 to use the cache",
        )
    if isinstance(exc, e.HfHubHTTPError):
        return HubError(f"{what}: hub error HTTP {status}: {exc}".splitlines()[0], "retry later")
    return None


def cache_write(path: Path, data: bytes | Sequence[bytes]) -> None:
    """Concurrent inspects never see a half-written cache entry; a cache needs no fsync, and a failed write is no
    error."""
    try:
        atomic_write(path, data, durable=False)
    except InputError:
        pass  # a read-only cache only costs speed
