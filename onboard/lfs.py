"""Git LFS pointers: the check every command runs before it parses a file of a local checkpoint.

A repo cloned without git-lfs holds a ~130-byte pointer ("version https://git-lfs… / oid sha256:… / size N") in
place of each large file; parsed as what it stands for it gives nonsense, so it is reported with the command that
fetches it. Hub downloads never hold pointers. A file named `*.lfs-pointer` is kept on purpose and not reported.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence
from pathlib import Path

import msgspec

from onboard.errors import InputError
from onboard.findings import Finding, group_of, span
from onboard.fsutil import files_under

CODE = "lfs-pointer"
POINTER_MAX_BYTES = 1024  # the Git LFS spec caps pointer files below this: larger files are never read here
POINTER_MIN_BYTES = 60
KEPT_SUFFIX = ".lfs-pointer"
_VERSIONS = (b"version https://git-lfs.github.com/spec/", b"version https://hawser.github.com/spec/")
_OID = re.compile(r"^oid (sha256:[0-9a-f]{64})$", re.MULTILINE)
_SIZE = re.compile(r"^size ([0-9]+)$", re.MULTILINE)
# https://huggingface.co/ORG/NAME(.git), git@hf.co:ORG/NAME: a model repo (datasets and spaces are not checkpoints).
_HUB_REMOTE = re.compile(
    r"(?:huggingface\.co|hf\.co)[/:](?!datasets/|spaces/)([A-Za-z0-9][\w.-]*/[\w.-]+?)(?:\.git)?/?$"
)
MAX_NAMED_FILES = 5  # a fix command names at most this many files; past that it fetches every LFS file


class LfsPointer(msgspec.Struct, frozen=True):
    file: str  # relative to the checkpoint folder
    oid: str  # `sha256:<64 hex>`: the content the pointer stands for
    size: int  # bytes of the real file
    pointer_bytes: int  # bytes of the pointer file on disk


def parse_pointer(data: bytes) -> tuple[str, int] | None:
    """(oid, size) when `data` is a Git LFS pointer file, else None."""
    if not data.startswith(_VERSIONS) or len(data) >= POINTER_MAX_BYTES:
        return None
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        return None
    oid, size = _OID.search(text), _SIZE.search(text)
    return (oid.group(1), int(size.group(1))) if oid and size else None


def read_pointer(path: Path, file: str | None = None) -> LfsPointer | None:
    """The pointer `path` is, or None (a real file, a folder, unreadable); reads only files small enough."""
    try:
        size = path.stat().st_size
        if not POINTER_MIN_BYTES <= size < POINTER_MAX_BYTES or not path.is_file():
            return None
        with path.open("rb") as fh:
            parsed = parse_pointer(fh.read(POINTER_MAX_BYTES))
    except OSError:
        return None
    return LfsPointer(file or path.name, parsed[0], parsed[1], size) if parsed else None


def find_pointers(root: Path, files: Iterable[str] | None = None) -> list[LfsPointer]:
    """Pointers among `files` (paths relative to `root`; default: every file under root outside hidden folders)."""
    if files is None:
        files = files_under(root)
    found = (read_pointer(root / name, name) for name in files if not name.endswith(KEPT_SUFFIX))
    return [p for p in found if p is not None]


def hub_repo_of_clone(root: Path) -> str | None:
    """`ORG/NAME` when `root` is a git clone of a Hugging Face model repo (its remote URL), else None."""
    import configparser  # only a pointer's hint needs it

    config = configparser.ConfigParser(strict=False, interpolation=None)
    try:
        config.read(root / ".git" / "config", encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError):
        return None
    for section in config.sections():
        if section.startswith("remote "):
            match = _HUB_REMOTE.search(config[section].get("url", "").strip())
            if match:
                return match.group(1)
    return None


def repo_id_for(root: Path, known: str | None = None) -> str | None:
    """The hub repo id `hf download` needs: `known`, else the clone's remote, else what checkpoint_id derives."""
    if known:
        return known
    from onboard.checkpoint_id import repo_id_of

    return hub_repo_of_clone(root) or repo_id_of(str(root))


def fix_command(files: Sequence[str], root: Path, repo_id: str | None = None) -> str:
    """The exact command(s) that replace the pointers `files` (relative to `root`) by their content."""
    named = len(files) <= MAX_NAMED_FILES
    include = ",".join(files)
    git = f"git lfs pull --include {shlex.quote(include)}" if named else "git lfs pull"
    git_fix = f"in {root}: {git} (needs git-lfs: git lfs install)"
    repo = repo_id_for(root, repo_id)
    if repo is None:
        return git_fix
    wanted = " ".join(shlex.quote(f) for f in files) + " " if named else ""
    hf = f"hf download {repo} {wanted}--local-dir {shlex.quote(str(root))}"
    if (root / ".git").exists():
        return f"{git_fix}; or: {hf}"
    return hf


def pointer_findings(
    pointers: Sequence[LfsPointer], root: Path, repo_id: str | None = None, severity: str = "fatal"
) -> list[Finding]:
    """One `lfs-pointer` finding per pointer, or one finding standing for all of them when there are several."""
    members = [
        Finding(CODE, severity, pointer_message(p), fix_command([p.file], root, repo_id), file=p.file) for p in pointers
    ]
    if len(members) < 2:
        return members
    total = sum(p.size for p in pointers)
    files = [p.file for p in pointers]
    message = (
        f"{len(pointers)} files are Git LFS pointers, not the files ({total:,} bytes of content not downloaded): "
        + span(files)
    )
    return [group_of(members, message, fix_command(files, root, repo_id))]


def pointer_message(p: LfsPointer) -> str:
    return (
        f"{p.file} is a Git LFS pointer ({p.pointer_bytes} bytes), not the file: the real file is {p.size:,} bytes, "
        f"oid {p.oid}"
    )


class LfsPointerError(InputError):
    """Files a command must read are Git LFS pointers: names them and the command that fetches them."""

    code = CODE

    def __init__(self, pointers: Sequence[LfsPointer], root: Path, repo_id: str | None = None) -> None:
        self.pointers = tuple(pointers)
        shown = "; ".join(pointer_message(p) for p in pointers[:MAX_NAMED_FILES])
        more = f"; and {len(pointers) - MAX_NAMED_FILES} more" if len(pointers) > MAX_NAMED_FILES else ""
        super().__init__(f"[{CODE}] {shown}{more}", fix_command([p.file for p in pointers], root, repo_id))


def require_real_files(root: Path, files: Iterable[str] | None = None, repo_id: str | None = None) -> None:
    """Raise LfsPointerError when any of `files` (default: every file of the folder) is a Git LFS pointer."""
    pointers = find_pointers(root, files)
    if pointers:
        raise LfsPointerError(pointers, root, repo_id)
