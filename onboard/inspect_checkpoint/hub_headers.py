"""Safetensors headers from the hub with HTTP range requests: one request per shard as the rule, all shards at once.

* `header_ranges`: each shard's first range, sized from the index (its tensor names and the shard's size give the
  header length to a few percent); a second request fetches only the rest when the estimate was short.
* `header_future`: the first try goes through libcurl's multi interface (curl_fetch.py: one thread, in C, at most
  `concurrency(curl=True)` in flight, default 192) where pycurl is installed and huggingface_hub's client is the one
  `install_client` installed; anything but a complete answer goes on through huggingface_hub's backoff in a worker
  thread (`header_bytes_of`, at most `concurrency()` at once, default 96; huggingface_hub's own reader uses 6): a
  retryable answer after the wait that backoff would make, with one retry fewer; any other error as
  huggingface_hub classifies it.
* `parse_header_blob`: the bytes fetched, validated (safetensors_header.py); HubSource caches them per commit.

Every request but libcurl's first tries goes through hub.py's helpers (huggingface_hub's session, auth headers,
backoff and error mapping).
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Callable, Mapping
from itertools import groupby
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from onboard.errors import CheckpointError, SourceNotFound
from onboard.inspect_checkpoint import hub
from onboard.inspect_checkpoint.checkpoint_types import SafetensorsHeader
from onboard.inspect_checkpoint.hub import ByteCounter
from onboard.inspect_checkpoint.hub_client import concurrency, install_client
from onboard.inspect_checkpoint.safetensors_header import PREFIX_LEN, check_header_len, parse_header

if TYPE_CHECKING:
    from concurrent.futures import Executor, Future

FIRST_RANGE = 100_000  # bytes asked for first when the index cannot size the range (no index, shard not in it)
MAX_FIRST_RANGE = 4_000_000
CURL_ENV = "ONBOARD_HUB_CURL"  # 0: every header range through huggingface_hub's client (see header_future)
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
    few long runs (by shard, or sorted by name with layers kept together: ~3k runs for 93k tensors), so this is a
    C-level sum per run, not a Python step per tensor (measured 4.5-8 ms against 14-18 ms for a sort by shard; as
    slow as that only for an index in random order).
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
    repo_id: str,
    sha: str,
    name: str,
    size: int | None,
    counter: ByteCounter,
    first_range: int = FIRST_RANGE,
    retries: int = hub.RETRIES,
) -> bytes:
    """Prefix + header bytes of one shard from the hub, through huggingface_hub's backoff: one range request, a second
    only for the rest of a longer header (the caller caches them: HubSource, in one pack per commit).
    Pure I/O: worker threads run this and leave the parsing to the caller, so 100 workers do not fight over the GIL
    while new ones are still starting."""
    if _leaves_repo(name):
        raise CheckpointError("path-traversal", f"{name}: path leaves the repo", "fix the index's weight_map", name)
    if hub.offline():
        raise SourceNotFound(
            f"the safetensors header of {name} ({repo_id} at {sha[:12]}) is not cached and HF_HUB_OFFLINE=1",
            "run the same command once with network access, or unset HF_HUB_OFFLINE",
        )
    url, what = _shard_url(repo_id, sha, name), _what(repo_id, name)
    first_end = _first_end(first_range, size)
    if first_end < 0:
        raise CheckpointError("truncated", f"{name}: file is empty", None, name)
    try:
        blob = hub.get_range(url, 0, first_end, what, counter, retries)
        need = _header_need(name, blob, size)
        if len(blob) < need:  # the estimate was short: only the rest
            blob += hub.get_range(url, len(blob), need - 1, what, counter)
    except SourceNotFound as exc:
        raise _missing_shard(exc, repo_id, sha, name) from exc
    return blob[:need]


def header_future(
    pool: Executor, repo_id: str, sha: str, name: str, size: int | None, counter: ByteCounter, first_range: int
) -> Future[bytes]:
    """`header_bytes_of` as a future, its first try sent at once through libcurl (curl_fetch.py) where it can be:
    no worker thread waits on it, and an answer holding the whole header completes the future on curl's thread.
    Everything else goes on in `pool` through huggingface_hub's backoff: the rest of a longer header; a retryable
    answer (5xx, 429, a dropped connection, a timeout) asked again after the wait it named (Retry-After, as
    huggingface_hub's backoff reads it) or the first backoff step, with one retry fewer; any other error raised as
    huggingface_hub classifies it. Without libcurl (or with a client of the process's own), `header_bytes_of` runs
    in `pool` from the first try."""
    from concurrent.futures import Future

    end = _first_end(first_range, size)
    if end < 0 or _leaves_repo(name) or hub.offline() or not first_try_by_curl():  # header_bytes_of explains these
        return pool.submit(header_bytes_of, repo_id, sha, name, size, counter, first_range)
    import uuid

    from onboard.inspect_checkpoint import curl_fetch

    url, what = _shard_url(repo_id, sha, name), _what(repo_id, name)
    out: Future[bytes] = Future()

    def then(fn: Callable[..., bytes], *args: Any) -> None:
        def run() -> None:
            try:
                out.set_result(fn(*args))
            except BaseException as exc:  # noqa: BLE001 - handed to whoever waits on the future
                out.set_exception(exc)

        try:
            pool.submit(run)
        except RuntimeError as exc:  # the source was closed meanwhile: nobody waits for this header any more
            out.set_exception(exc)

    def done(result: curl_fetch.RangeResult) -> None:  # on curl's thread: decide, never wait
        try:
            if result.error is not None or result.status not in (200, 206):
                then(_after_first_try, result, url, what, repo_id, sha, name, size, counter, first_range)
                return
            counter.add(result.received)
            blob = result.body
            need = _header_need(name, blob, size)
            if len(blob) >= need:
                out.set_result(blob[:need])
            else:  # a header longer than its estimate: the rest in one more request
                then(lambda: (blob + hub.get_range(url, len(blob), need - 1, what, counter))[:need])
        except BaseException as exc:  # noqa: BLE001 - a bad header (CheckpointError), or a bug: never a hung future
            if not out.done():
                out.set_exception(exc)

    trace = {"X-Amzn-Trace-Id": str(uuid.uuid4())}  # the request id huggingface_hub's request hook adds
    headers = hub.request_headers(**trace)
    try:
        curl_fetch.fetch_range(url, headers, end, done, timeout_s=hub.TIMEOUT_S, max_in_flight=concurrency(curl=True))
    except Exception:  # noqa: BLE001 - libcurl refused the transfer (no descriptor left, an option it lacks)
        return pool.submit(header_bytes_of, repo_id, sha, name, size, counter, first_range)
    return out


def first_try_by_curl() -> bool:
    """Whether header ranges are first tried through libcurl: pycurl is there, huggingface_hub's client is the one
    `install_client` installed (not a factory of the process's own, such as a proxy or a CA bundle, which must see
    every request), and ONBOARD_HUB_CURL is not 0."""
    if os.environ.get(CURL_ENV, "").strip() == "0" or not install_client():
        return False
    from onboard.inspect_checkpoint import curl_fetch

    return curl_fetch.available()


def _after_first_try(
    result: Any, url: str, what: str, repo_id: str, sha: str, name: str, size: int | None, counter: ByteCounter,
    first_range: int,
) -> bytes:  # fmt: skip
    """In a worker: a first try that brought no header. A retryable answer is asked again through huggingface_hub's
    backoff after the wait it named; another error is raised as huggingface_hub classifies it (no request more)."""
    import httpx2
    from huggingface_hub.utils import hf_raise_for_status

    if result.error is None and result.status >= 400 and result.status not in hub.RETRY_STATUS:
        answer = httpx2.Response(result.status, headers=result.headers, content=result.body,
                                 request=httpx2.Request("GET", url))  # fmt: skip
        try:
            hf_raise_for_status(answer)
        except Exception as exc:  # noqa: BLE001 - mapped to a clean error, as header_bytes_of's
            mapped = hub.mapped_error(exc, what)
            mapped.__cause__ = exc  # what _missing_shard reads, as on header_bytes_of's path
            raise (
                _missing_shard(mapped, repo_id, sha, name) if isinstance(mapped, SourceNotFound) else mapped
            ) from exc
    if result.error is not None or result.status in hub.RETRY_STATUS:
        time.sleep(_first_wait(result.status, result.headers))
        return header_bytes_of(repo_id, sha, name, size, counter, first_range, retries=hub.RETRIES - 1)
    return header_bytes_of(repo_id, sha, name, size, counter, first_range)  # an answer of another kind: ask again


def _first_wait(status: int, headers: Mapping[str, str]) -> float:
    """What huggingface_hub's backoff waits after a retryable answer: a 429's rate-limit reset or a Retry-After (in
    seconds), plus one second, else the first backoff step."""
    from huggingface_hub.utils import parse_ratelimit_headers

    if status == 429 and (limit := parse_ratelimit_headers(headers)) is not None and limit.remaining == 0:
        return float(limit.reset_in_seconds) + 1
    retry_after = hub.retry_after_s(headers)
    if status in hub.RETRY_STATUS and retry_after is not None:
        return retry_after + 1
    return hub.RETRY_BASE_S


def _missing_shard(exc: SourceNotFound, repo_id: str, sha: str, name: str) -> Exception:
    from huggingface_hub.errors import EntryNotFoundError

    if isinstance(exc.__cause__, EntryNotFoundError):
        return CheckpointError("missing-shard", f"{name}: not found in {repo_id} at {sha[:12]}", None, name)
    return exc


def _shard_url(repo_id: str, sha: str, name: str) -> str:
    return f"{hub.endpoint()}/{repo_id}/resolve/{sha}/{name}"


def _what(repo_id: str, name: str) -> str:
    return f"{name} of hub repo {repo_id!r}"


def _first_end(first_range: int, size: int | None) -> int:
    """The first range's last byte: `first_range` bytes, not past the file's end (negative for an empty file)."""
    return (first_range if size is None else min(first_range, size)) - 1


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
