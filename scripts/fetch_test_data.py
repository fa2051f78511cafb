#!/usr/bin/env python3
"""Fetch the real third-party files the real-data tests read (configs, tokenizers, chat templates, llama.cpp's
tokenizer vectors) from their public sources at pinned revisions, into the fetch cache.

    .venv/bin/python scripts/fetch_test_data.py            # into ~/.cache/onboard/test-data (ONBOARD_TEST_DATA_CACHE)
    .venv/bin/python scripts/fetch_test_data.py --mirror URL

Every file is listed once in tests/real_data/manifest.json with its source repository, revision, licence and sha256;
a file whose bytes do not hash to that is refused, never kept. Files already in the cache with the right hash are not
fetched again. The cache counts as complete (tests read it: tests/ci.py real_data_dir) only once every file is there.
Sources are GitHub repositories, fetched as raw files: https://raw.githubusercontent.com/OWNER/REPO/REVISION/PATH;
--mirror (or ONBOARD_TEST_DATA_MIRROR) serves the same paths from elsewhere.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

MANIFEST = Path(__file__).resolve().parent.parent / "tests" / "real_data" / "manifest.json"
DEFAULT_MIRROR = "https://raw.githubusercontent.com"
CACHE_ENV = "ONBOARD_TEST_DATA_CACHE"
MIRROR_ENV = "ONBOARD_TEST_DATA_MIRROR"
COMPLETE = "COMPLETE"
"""Written last, holding the manifest's sha256: the cache is complete for exactly that manifest."""
TRIES = 4
BACKOFF_S = 1.0
"""The first wait before a retry (5xx, 429, a dropped connection); doubled each time."""
WORKERS = 8


class FetchError(Exception):
    pass


@dataclass(frozen=True)
class Entry:
    path: str
    """Where the tests read it, relative to the data folder."""
    repo: str
    revision: str
    source_path: str
    sha256: str
    size: int
    licence: str

    def url(self, mirror: str) -> str:
        return f"{mirror.rstrip('/')}/{self.repo}/{self.revision}/{self.source_path}"


def cache_root() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "onboard" / "test-data"
    return Path(os.environ.get(CACHE_ENV) or default)


def manifest_digest(manifest: Path | None = None) -> str:
    return hashlib.sha256((manifest or MANIFEST).read_bytes()).hexdigest()


def read_manifest(manifest: Path | None = None) -> list[Entry]:
    manifest = manifest or MANIFEST
    try:
        doc = json.loads(manifest.read_text(encoding="utf-8"))
        sources = doc["sources"]
        entries = [
            Entry(f["path"], f["source"], f.get("revision") or sources[f["source"]]["revision"],
                  f["source_path"], f["sha256"], int(f["size"]), sources[f["source"]]["licence"])
            for f in doc["files"]
        ]  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise FetchError(f"{manifest}: not a readable test-data manifest ({exc!r}); restore it from git") from exc
    for entry in entries:
        if entry.path.startswith(("/", "\\")) or ".." in Path(entry.path).parts:
            raise FetchError(f"{manifest}: path {entry.path!r} leaves the data folder; fix that entry")
    return entries


def complete_cache(root: Path | None = None, manifest: Path | None = None) -> Path | None:
    """The cached data folder when a fetch of this manifest finished there, else None."""
    root = root or cache_root()
    stamp = root / COMPLETE
    try:
        done = stamp.read_text().strip() == manifest_digest(manifest)
    except OSError:
        return None
    return root / "files" if done else None


def _sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _download(url: str) -> bytes:
    delay = BACKOFF_S
    for attempt in range(1, TRIES + 1):
        try:
            with urllib.request.urlopen(url, timeout=60) as resp:
                return resp.read()
        except urllib.error.HTTPError as exc:
            if exc.code < 500 and exc.code != 429:
                raise FetchError(f"{url}: HTTP {exc.code}") from exc
            why = f"HTTP {exc.code}"
        except (urllib.error.URLError, OSError) as exc:
            why = str(getattr(exc, "reason", exc))
        if attempt == TRIES:
            raise FetchError(f"{url}: {why} (tried {TRIES} times)")
        time.sleep(delay)
        delay *= 2
    raise AssertionError("unreachable")


def fetch_one(entry: Entry, files: Path, mirror: str) -> bool:
    """Fetch one file unless it is cached with the right hash; True when it was downloaded."""
    target = files / entry.path
    if _sha256(target) == entry.sha256:
        return False
    body = _download(entry.url(mirror))
    got = hashlib.sha256(body).hexdigest()
    if got != entry.sha256:
        raise FetchError(
            f"{entry.url(mirror)}: sha256 {got[:12]}… ({len(body)} bytes), the manifest pins {entry.sha256[:12]}… "
            f"({entry.size} bytes) for {entry.path}; the source changed or the mirror serves something else"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    partial.write_bytes(body)
    os.replace(partial, target)
    return True


def fetch(root: Path, mirror: str, manifest: Path | None = None, log=print) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """Fetch every manifest file into root/files; (downloaded, already cached). Raises FetchError naming each file
    that could not be fetched, after trying them all (what was fetched stays cached)."""
    entries = read_manifest(manifest)
    files = root / "files"
    (root / COMPLETE).unlink(missing_ok=True)
    failures: list[str] = []
    downloaded = 0

    def one(entry: Entry) -> None:
        nonlocal downloaded
        try:
            if fetch_one(entry, files, mirror):
                downloaded += 1
        except FetchError as exc:
            failures.append(str(exc))

    with ThreadPoolExecutor(WORKERS) as pool:
        list(pool.map(one, entries))
    if failures:
        shown = "\n  ".join(sorted(failures)[:10])
        more = f"\n  … and {len(failures) - 10} more" if len(failures) > 10 else ""
        raise FetchError(f"{len(failures)} of {len(entries)} files not fetched:\n  {shown}{more}")
    (root / COMPLETE).write_text(manifest_digest(manifest) + "\n")
    log(f"test data: {downloaded} fetched, {len(entries) - downloaded} already cached, in {files}")
    return downloaded, len(entries) - downloaded


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=None, help=f"cache folder (default: ${CACHE_ENV} or {cache_root()})")
    parser.add_argument("--mirror", default=os.environ.get(MIRROR_ENV) or DEFAULT_MIRROR,
                        help="serves OWNER/REPO/REVISION/PATH like raw.githubusercontent.com")  # fmt: skip
    args = parser.parse_args(argv)
    try:
        fetch(args.cache or cache_root(), args.mirror)
    except FetchError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        print("Hint: check the network (or --mirror), then run this again: cached files are kept", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
