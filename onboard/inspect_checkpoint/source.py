"""SOURCE of `onboard inspect`: a local folder or a hub repo, behind one interface.

A Source lists every file, reads small files and safetensors headers (never tensor data), and turns problems met
while listing (symlinks out of the repo, unsafe names) into `findings`. Hub sources fetch the small files and headers
in the background as soon as the listing is known, so a slow link costs about two round trips, not one per file.
"""

from __future__ import annotations

import mmap
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from onboard.checkpoint_id import is_commit_sha
from onboard.errors import CheckpointError, ConfigError, InputError, OnboardError, SourceNotFound
from onboard.findings import Finding, fatal, warning
from onboard.fsutil import json_object
from onboard.inspect_checkpoint.checkpoint_types import (
    INDEX_FILE,
    RepoFile,
    RepoListing,
    SafetensorsHeader,
    is_safe_relpath,
)
from onboard.inspect_checkpoint.safetensors_header import read_local_header
from onboard.lfs import CODE as LFS_CODE
from onboard.lfs import (
    POINTER_MAX_BYTES,
    LfsPointerError,
    find_pointers,
    pointer_findings,
    pointer_message,
    read_pointer,
)

if TYPE_CHECKING:
    from collections.abc import Callable
    from concurrent.futures import Future

# Small files `onboard inspect` reads from every repo: fetched concurrently up front for hub sources.
PREFETCH_FILES = (
    "config.json", "generation_config.json", "tokenizer_config.json", "special_tokens_map.json", INDEX_FILE,
    "chat_template.jinja", "chat_template.json", "preprocessor_config.json", "processor_config.json",
)  # fmt: skip
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".pkl", ".gguf", ".h5", ".msgpack", ".onnx")
MAP_FROM_BYTES = 1 << 20  # JSON files from this size on are decoded from a memory map
SMALL_FILE_LIMIT = 256 * 2**20  # tokenizer.json of large-vocab models is ~30 MB; weights are refused by suffix
SKIP_DIRS = {".git", ".cache"}  # git metadata, huggingface_hub's local_dir bookkeeping
MAX_FILES = 200_000  # a checkpoint has tens of files; walking "/" or a home folder by mistake must stop early
_REPO_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}")


def refuse_local_revision(source: str, revision: str | None) -> None:
    """--revision names a hub commit: with a local folder it would be ignored without a word, so it is refused."""
    if revision is not None and (Path(source).expanduser().is_dir()):
        raise InputError(
            f"--revision {revision!r} applies to hub repos, not the local folder {source!r}",
            "check out the revision in the folder (git checkout), or drop --revision",
        )


def open_source(
    source: str,
    revision: str | None = None,
    *,
    prefetch: bool = True,
    listing: RepoListing | None = None,
    speculate: bool = True,
) -> Source:
    """A local folder if it exists (or looks like a path), else a hub repo id `org/name`. Hub only: `prefetch` starts
    fetching the small files right away, `listing` is this run's earlier listing of the repo, `speculate` asks for
    config.json and the index alongside the listing (hub.list_repo)."""
    looks_local = source.startswith(("./", "../", "/", "~", ".\\")) or source in (".", "..")
    path = Path(source).expanduser()
    if path.exists() or looks_local:
        if not path.is_dir():
            what = "does not exist" if not path.exists() else "is a file, not a folder"
            raise SourceNotFound(
                f"local checkpoint folder {source!r} {what}",
                "give the folder that holds config.json (or a hub repo id like org/name)",
            )
        refuse_local_revision(source, revision)
        return LocalSource(source, path.resolve())
    if not _REPO_ID_RE.fullmatch(source) or ".." in source or source.endswith((".", "-")):
        raise SourceNotFound(
            f"{source!r} is neither an existing local folder nor a hub repo id (org/name)",
            "for a local folder check the path (prefix ./ for a relative one); a hub id looks like Qwen/Qwen3-8B",
        )
    return HubSource(source, revision, prefetch=prefetch, listing=listing, speculate=speculate)


class Source:
    """What `onboard inspect` reads from. Subclasses: LocalSource, HubSource."""

    display: str
    repo_id: str | None
    revision: str | None
    local_dir: Path | None
    files: tuple[RepoFile, ...]
    findings: tuple[Finding, ...]

    def __init__(self) -> None:
        self._sizes = {f.path: f.size for f in self.files}
        self._index: dict[str, Any] | None = None
        self._index_read = False

    @property
    def bytes_fetched(self) -> int:
        """Bytes of safetensors headers fetched over the network (0 for local sources)."""
        return 0

    def has_file(self, name: str) -> bool:
        return name in self._sizes

    def file_size(self, name: str) -> int | None:
        return self._sizes.get(name)

    def path_of(self, name: str) -> Path | None:
        """A local path for a small file (downloaded into the HF cache for hub sources); None if absent."""
        raise NotImplementedError

    def fetch(self, names: list[str]) -> None:
        """Start fetching these small files now (hub sources); `path_of` then waits for each."""

    def _readable_path(self, name: str) -> Path | None:
        """The local path of `name` (None if absent), refused if it is a git-lfs pointer instead of the file."""
        path = self.path_of(name)
        if path is None:
            return None
        pointer = read_pointer(path, name)
        if pointer is not None:  # before any parse: a pointer read as JSON is only "malformed JSON"
            raise LfsPointerError([pointer], self.local_dir or path.parent, self.repo_id)
        return path

    def read_text(self, name: str) -> str | None:
        path = self._readable_path(name)
        if path is None:
            return None
        try:
            return path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError) as exc:
            raise _unreadable(name, exc) from exc

    def read_json(self, name: str, typed: Callable[[bytes], dict[str, Any]] | None = None) -> dict[str, Any] | None:
        """The JSON object in `name`; None if the repo has no such file; ConfigError naming file+line if malformed.
        `typed`: a faster decoder for the file's usual shape, tried first."""
        path = self._readable_path(name)
        if path is None:
            return None
        try:
            with path.open("rb") as fh:
                if fh.seek(0, os.SEEK_END) >= MAP_FROM_BYTES:
                    with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as view:
                        doc = _fast_decode(view, typed)
                    if doc is not None:
                        return doc
                fh.seek(0)
                data = fh.read()  # msgspec reads (and checks) UTF-8 bytes itself: no text copy
        except OSError as exc:
            raise _unreadable(name, exc) from exc
        doc = _fast_decode(data, typed)
        if doc is not None:
            return doc
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _unreadable(name, exc) from exc
        return json_object(text, name, ConfigError, f"fix {name} (a JSON validator shows the exact spot)")

    def index(self) -> dict[str, Any] | None:
        """model.safetensors.index.json, or None for single-file / non-safetensors checkpoints."""
        if not self._index_read:
            listed = tuple(path for path in self._sizes if path.endswith(".safetensors"))
            self._index = self.read_json(INDEX_FILE, _index_decoder(listed))
            self._index_read = True
        return self._index

    def safetensors_files(self) -> list[str]:
        """The shards in the order writers number them: the index's weight_map values if there is an index, else
        top-level *.safetensors. Unsafe paths are left out here; `check_integrity` reports them."""
        idx = self.index()
        weight_map = idx.get("weight_map") if idx else None
        if isinstance(weight_map, dict):
            try:
                distinct = dict.fromkeys(weight_map.values())
            except TypeError:  # an unhashable value: an invalid index (integrity says so)
                distinct = dict.fromkeys(v for v in weight_map.values() if isinstance(v, str))
            return sorted(v for v in distinct if isinstance(v, str) and is_safe_relpath(v))
        return self.top_level_shards()

    def top_level_shards(self) -> list[str]:
        # Sub-folders such as original/ hold other formats.
        return sorted(f.path for f in self.files if f.path.endswith(".safetensors") and "/" not in f.path)

    def read_headers(self, names: list[str]) -> dict[str, SafetensorsHeader | CheckpointError]:
        raise NotImplementedError

    def close(self) -> None:
        """Drop background work (hub sources); a Source is also a context manager."""

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LocalSource(Source):
    def __init__(self, display: str, root: Path) -> None:
        self.display = display
        self.repo_id = None
        self.local_dir = root
        self.revision = git_head(root)
        # An HF cache snapshot links every file into ../../blobs: that folder counts as inside the repo.
        self._allowed = root.parent.parent if root.parent.name == "snapshots" else root
        files, findings, self._links = _list_local(root, self._allowed)
        self.files = tuple(files)
        # A clone without git-lfs: every pointer is named once here (size, oid, the fetch command), never parsed.
        small = [f.path for f in files if f.size is not None and f.size < POINTER_MAX_BYTES]
        self.pointers = {p.file: p for p in find_pointers(root, small)}
        self.findings = tuple(findings + pointer_findings(list(self.pointers.values()), root))
        super().__init__()

    def path_of(self, name: str) -> Path | None:
        if not is_safe_relpath(name) or name not in self._sizes:
            return None
        path = self.local_dir / name  # type: ignore[operator]
        if name not in self._links:  # a regular file the walk found under the resolved root: already its real path
            return path
        real = path.resolve()
        if not real.is_relative_to(self._allowed.resolve()):  # reported as a finding at listing time
            return None
        return real

    def read_headers(self, names: list[str]) -> dict[str, SafetensorsHeader | CheckpointError]:
        # Sequential: the work is JSON parsing under the GIL, from the page cache; threads would only take turns.
        return {name: self._header(name) for name in names}

    def _header(self, name: str) -> SafetensorsHeader | CheckpointError:
        path = self.path_of(name)
        if path is None:
            return CheckpointError("missing-shard", f"{name}: not found in {self.display}", None, name)
        if name in self.pointers:  # reported from the listing (source.findings); its "header" is pointer text
            return CheckpointError(LFS_CODE, pointer_message(self.pointers[name]), None, name)
        try:
            return read_local_header(path, name)
        except CheckpointError as exc:
            return exc


def _fast_decode(data: bytes | mmap.mmap, typed: Callable[[bytes], dict[str, Any]] | None) -> dict[str, Any] | None:
    """msgspec's decode, `typed` first; None if neither gives a JSON object (json then explains the problem)."""
    for decode in (typed, msgspec.json.decode) if typed else (msgspec.json.decode,):
        try:
            doc = decode(data)  # type: ignore[arg-type]
        except Exception:  # noqa: BLE001 - re-parsed by the caller with json for a precise message
            continue
        return doc if isinstance(doc, dict) else None
    return None


def _index_decoder(listed: tuple[str, ...]) -> Callable[[bytes], dict[str, Any]] | None:
    """A decoder for the usual index (`metadata`, a `weight_map` naming listed shards) that shares one string per
    shard instead of a copy per tensor. Anything else fails it, and the caller decodes the file generically."""
    if not listed:
        return None

    fields = [("weight_map", dict[str, Literal[listed]]), ("metadata", Any, msgspec.UNSET)]  # type: ignore[valid-type]
    decode = msgspec.json.Decoder(msgspec.defstruct("Index", fields, forbid_unknown_fields=True)).decode
    return lambda data: {k: v for k, v in msgspec.structs.asdict(decode(data)).items() if v is not msgspec.UNSET}


def _unreadable(name: str, exc: UnicodeDecodeError | OSError) -> ConfigError:
    if isinstance(exc, UnicodeDecodeError):
        return ConfigError(f"{name}: not UTF-8 text (byte {exc.start})", f"re-save {name} as UTF-8")
    return ConfigError(f"{name}: cannot read ({exc.strerror or exc})", "check the file's permissions")


def _list_local(root: Path, allowed: Path) -> tuple[list[RepoFile], list[Finding], set[str]]:
    """Every regular file under root (relative paths), findings for symlinks that leave the repo, and the listed
    files that are symlinks (only those need resolving when read)."""
    files: list[RepoFile] = []
    findings: list[Finding] = []
    links: set[str] = set()
    allowed_real = allowed.resolve()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        base = Path(dirpath)
        if len(files) > MAX_FILES:
            raise InputError(
                f"{root} holds more than {MAX_FILES:,} files: not a checkpoint folder",
                "give the folder that holds config.json and the weights",
            )
        for entry in dirnames:  # os.walk does not enter symlinked folders; only their target matters
            if (base / entry).is_symlink():
                _check_link(base / entry, root, allowed_real, findings)
        for entry in sorted(filenames):
            path = base / entry
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                if not _check_link(path, root, allowed_real, findings):
                    continue
                links.add(rel)
            files.append(RepoFile(rel, path.stat().st_size))
    return files, findings, links


def _check_link(path: Path, root: Path, allowed_real: Path, findings: list[Finding]) -> bool:
    """True if the symlink stays inside the repo and resolves; otherwise add a finding."""
    rel = path.relative_to(root).as_posix()
    try:
        target = path.resolve()
    except (OSError, RuntimeError):  # unreadable or looping link: treat as leaving the repo
        target = Path(os.readlink(path))
    if not target.is_relative_to(allowed_real):
        findings.append(
            fatal(
                "symlink-outside",
                f"{rel} is a symlink to {target}, outside the repo",
                "replace the link with the file itself: a checkpoint must not read files outside its folder",
                file=rel,
            )
        )
        return False
    if not target.exists():
        findings.append(
            warning(
                "symlink-dangling",
                f"{rel} is a symlink to missing {target}",
                "restore the target or remove the link",
                file=rel,
            )
        )
        return False
    return True


def git_head(root: Path) -> str | None:
    """The commit sha checked out in `root` if it is a git checkout (read from .git, no subprocess)."""
    git = root / ".git"
    try:
        if git.is_file():  # worktree / submodule: "gitdir: <path>"
            git = (root / git.read_text().split(":", 1)[1].strip()).resolve()
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref:"):
            return head if is_commit_sha(head) else None
        ref = head.split(":", 1)[1].strip()
        ref_file = git / ref
        if ref_file.is_file():
            return ref_file.read_text().strip()
        for line in (git / "packed-refs").read_text().splitlines():
            if line.endswith(" " + ref):
                return line.split()[0]
    except (OSError, IndexError):
        return None
    return None


class HubSource(Source):
    # `hub` (and huggingface_hub) is imported in these methods only: a local inspect never loads it.
    def __init__(
        self,
        repo_id: str,
        revision: str | None,
        *,
        prefetch: bool = True,
        listing: RepoListing | None = None,
        speculate: bool = True,
    ) -> None:
        from concurrent.futures import ThreadPoolExecutor

        from onboard.inspect_checkpoint import hub, hub_headers

        self.display = repo_id
        self.repo_id = repo_id
        self.local_dir = None
        # Every request but the listing runs on this pool: its size bounds the requests in flight.
        self._pool = ThreadPoolExecutor(max_workers=hub.concurrency(), thread_name_prefix="onboard-hub")
        if listing is None or listing.repo_id != repo_id or revision not in (listing.revision, listing.sha):
            listing = hub.list_repo(repo_id, revision, speculate=speculate)
        self.listing = listing
        self.revision = listing.sha
        files = self.files = listing.files
        bad = [f.path for f in files if not is_safe_relpath(f.path)]
        self.findings = tuple(
            fatal(
                "path-traversal", f"hub listing of {repo_id} has an unsafe path {p!r}", "report it to the hub", file=p
            )
            for p in bad
        )
        super().__init__()
        self._counter = hub.ByteCounter()  # header bytes (bytes_fetched)
        self._file_counter = hub.ByteCounter()  # small files and the index
        self._downloads: dict[str, Future[Path | None]] = {}
        self._headers: dict[str, Future[bytes]] = {}  # raw bytes, parsed by read_headers and cached as they came
        self._ranges: dict[str, int] | None = None  # first range per shard, sized from the index
        self._pack = hub_headers.read_header_pack(repo_id, listing.sha)  # headers read before (immutable per commit)
        if prefetch:
            for name in PREFETCH_FILES:
                if name in self._sizes:
                    self._download_future(name)
            if INDEX_FILE not in self._sizes:  # nothing to size the ranges with: ask for FIRST_RANGE right away
                for f in files:
                    if f.path.endswith(".safetensors") and is_safe_relpath(f.path):
                        self._header_future(f.path)

    @property
    def bytes_fetched(self) -> int:
        return self._counter.value

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _download_future(self, name: str) -> Future[Path | None]:
        from onboard.inspect_checkpoint import hub

        fut = self._downloads.get(name)
        if fut is None:
            args = (self.repo_id, self.revision, name, self._sizes.get(name), self._file_counter)
            fut = self._pool.submit(hub.fetch_file, *args)  # type: ignore[arg-type]
            self._downloads[name] = fut
        return fut

    def _header_future(self, name: str) -> Future[bytes]:
        from onboard.inspect_checkpoint import hub_headers

        fut = self._headers.get(name)
        if fut is None and name in self._pack:
            from concurrent.futures import Future

            fut = self._headers[name] = Future()
            fut.set_result(self._pack[name])
        if fut is None:
            first_range = (self._ranges or {}).get(name, hub_headers.FIRST_RANGE)
            args = (self.repo_id, self.revision, name, self._sizes.get(name), self._counter, first_range)
            fut = self._pool.submit(hub_headers.header_bytes_of, *args)  # type: ignore[arg-type]
            self._headers[name] = fut
        return fut

    def _size_ranges(self) -> None:
        """Each shard's first range from the index's tensor names (once, before any header request is sent)."""
        from onboard.inspect_checkpoint import hub_headers

        if self._ranges is not None:
            return
        try:
            index = self.index()
        except OnboardError:  # reported by whoever reads the index; the headers still come, at FIRST_RANGE
            index = None
        weight_map = index.get("weight_map") if index else None
        usable = isinstance(weight_map, dict) and weight_map and set(map(type, weight_map.values())) == {str}
        self._ranges = hub_headers.header_ranges(weight_map, self._sizes) if usable else {}  # type: ignore[arg-type]

    def fetch(self, names: list[str]) -> None:
        for name in names:
            if is_safe_relpath(name) and name in self._sizes and self._small(name):
                self._download_future(name)

    def _small(self, name: str) -> bool:
        return not name.endswith(WEIGHT_SUFFIXES) and (self._sizes.get(name) or 0) <= SMALL_FILE_LIMIT

    def path_of(self, name: str) -> Path | None:
        if not is_safe_relpath(name) or name not in self._sizes:
            return None  # not in the listing: no request needed
        size = self._sizes[name] or 0
        if not self._small(name):
            raise InputError(
                f"refusing to download {name} ({size:,} bytes) of {self.repo_id}: weights are never "
                "downloaded by inspect",
                "this is a bug in the caller: read headers with read_headers()",
            )
        return self._download_future(name).result()

    def read_headers(self, names: list[str]) -> dict[str, SafetensorsHeader | CheckpointError]:
        self._size_ranges()
        from concurrent.futures import as_completed

        from onboard.inspect_checkpoint import hub_headers

        pending = {self._header_future(name): name for name in names if name in self._sizes}
        # Parsed in the order they arrive, so parsing overlaps the requests still in flight.
        parsed: dict[str, SafetensorsHeader | CheckpointError] = {}
        fetched: dict[str, bytes] = {}
        for fut in as_completed(pending):
            name = pending[fut]
            try:
                fetched[name] = fut.result()
                parsed[name] = hub_headers.parse_header_blob(name, fetched[name], self._sizes.get(name))
            except CheckpointError as exc:
                parsed[name] = exc
        if fetched.keys() - self._pack.keys():  # what came from the hub: cached for the next inspect of this commit
            self._pack.update(fetched)
            hub_headers.write_header_pack(self.repo_id, self.revision, self._pack)  # type: ignore[arg-type]
        where = f"not in {self.repo_id} at {self.revision}"
        return {n: parsed.get(n) or CheckpointError("missing-shard", f"{n}: {where}", None, n) for n in names}
