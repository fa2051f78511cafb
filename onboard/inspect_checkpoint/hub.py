"""Hub access for `onboard inspect`, only through huggingface_hub (endpoint, token, offline switch, backoff, cache).

`list_repo` gives a commit's files once per run; `fetch_file` reads a small file in one GET (no HEAD first: the
index sizes the header requests, so it is on the critical path); `get_range` reads safetensors headers. Every
request goes through huggingface_hub's backoff (5xx, 429 and dropped connections retried, Retry-After waited out).
Listings, small files and headers are immutable per commit and cached beside the HF cache, so a repo inspected once
online can be inspected offline. Environment variables are read at call time (huggingface_hub reads them at import).
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
from onboard.inspect_checkpoint.checkpoint_types import INDEX_FILE, RepoFile, RepoListing
from onboard.retry_after import retry_after_seconds

if TYPE_CHECKING:
    from concurrent.futures import Future

RETRIES = 3  # after the first try, on 5xx / 429 / timeouts / dropped connections
RETRY_BASE_S = 0.25  # first backoff wait, doubled each retry (huggingface_hub's http_backoff); Retry-After wins
TIMEOUT_S = float(os.environ.get("ONBOARD_HUB_TIMEOUT", "30"))
CONCURRENCY_ENV = "ONBOARD_HUB_CONCURRENCY"
# Requests in flight at once: a burst of a connection per shard overflows a small server's listen backlog (5 in
# Python's http.server and many proxies), and each dropped connect waits for TCP's SYN retry.
DEFAULT_CONCURRENCY = 16
RETRY_STATUS = (408, 429, 500, 502, 503, 504)
# Asked for at the revision while the listing is on its way (used only if the listing names the same commit).
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


def list_repo(repo_id: str, revision: str | None, *, speculate: bool = True) -> RepoListing:
    """The commit sha and every file with its size at `revision` (default branch when None). A listing cached by
    commit sha is used without asking the hub; a branch or tag can move, so it is always asked for online.
    `speculate`: also ask for SPECULATIVE_FILES now, for a caller that will read them."""
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
    """The model info fields a listing reads; the sha goes into URLs and cache paths, so it is validated."""

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
    """One small file in a single GET into onboard's cache; None when the hub does not have it. Offline, or with no
    listed size: `download`."""
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
    """Ask for SPECULATIVE_FILES now, in background threads, so they arrive with the listing, not a round trip after
    it. Only this listing's are kept, in memory, until `fetch_file` claims them for the listed commit."""
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
    """(commit, body) of one file, or None on any failure: a miss only costs the normal GET, so no retries."""
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
    """A read-only cache: the file is read once from a private temporary folder, under its own name."""
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix="onboard-hub-")) / path.name
    tmp.write_bytes(data)
    return tmp


def download_snapshot(listing: RepoListing, patterns: Sequence[str]) -> Path:
    """The listed files matching `patterns` (fnmatch, as snapshot_download's allow_patterns) in huggingface_hub's
    cache, without listing the repo again; returns the snapshot folder. Weights included: never for inspect."""
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
    """huggingface_hub's backoff settings for our requests (read at call time: tests patch RETRY_BASE_S)."""
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
    """Run a huggingface_hub function (hf_hub_download) with the backoff our own requests get (backoff_settings)."""
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
    return retry_after_seconds(getattr(getattr(exc, "response", None), "headers", None)) or 0.0


def _status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


def _retryable(exc: BaseException) -> bool:
    import httpx2  # huggingface_hub's HTTP client

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
    """Atomic (concurrent inspects never see half an entry), no fsync; a failed write only costs speed."""
    try:
        atomic_write(path, data, durable=False)
    except InputError:
        pass
