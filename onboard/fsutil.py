"""File writes that never leave half a file (`atomic_write`, the package's one), and OS errors turned into
messages that say what to do."""

from __future__ import annotations

import errno
import functools
import json
import math
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from onboard import serde
from onboard.errors import InputError, NonFiniteValue, OnboardError

P = ParamSpec("P")
R = TypeVar("R")

# errno -> what to tell the person, the same from every writer
_OS_HINTS: dict[int, str] = {
    errno.ENOSPC: "the disk is full: free space (or point --workspace/--registry elsewhere) and rerun",
    errno.EDQUOT: "the disk quota is exhausted: free space (or point --workspace/--registry elsewhere) and rerun",
    errno.EACCES: "no permission to {verb} there: fix the permissions or choose another path",
    errno.EPERM: "no permission to {verb} there: fix the permissions or choose another path",
    errno.EROFS: "that file system is read-only: choose a writable path",
    errno.ENOTDIR: "a parent of that path is a file, not a folder: choose another path",
    errno.EISDIR: "that path is a folder: give a file path",
    errno.EEXIST: "a file is in the way where a folder is needed: choose another path",
    errno.ENAMETOOLONG: "a file or folder name in that path is too long for the file system: choose a shorter one",
}


def os_error(exc: OSError, path: Path | str, doing: str) -> InputError:
    """An InputError naming the path and the fix for a failed file operation."""
    why = exc.strerror or str(exc)
    # A refused read is not a refused write: the permission hints name what was being done (read, write, use).
    verb = "read" if doing.startswith(("read", "hash")) else "open" if doing == "use" else "write"
    hint = _OS_HINTS.get(exc.errno or 0, "check the path and rerun").replace("{verb}", verb)
    return InputError(f"cannot {doing} {path}: {why}", hint)


def clean_os_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Decorator for public entry points: a stray OSError becomes an InputError."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except OSError as exc:
            raise os_error(exc, exc.filename or "the workspace", "use") from exc

    return wrapper


def make_dirs(folder: Path) -> Path:
    """Create `folder` and its parents; an OSError becomes an InputError naming it. Long commands call it on their
    output folder first, so a path that cannot hold their output fails at once, not after the work."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # FileExistsError included: a file where the folder should be (EEXIST's hint says so)
        raise os_error(exc, folder, "create the folder") from exc
    return folder


@contextmanager
def output_folder(folder: Path) -> Iterator[Path]:
    """make_dirs(folder), undone if the command fails: the folders it created are removed while still empty, so a
    run that stopped early leaves nothing to mistake for a result."""
    missing = [p for p in (folder, *folder.parents) if not p.exists()]  # the deepest first
    make_dirs(folder)
    try:
        yield folder
    except BaseException:
        for created in missing:
            try:
                created.rmdir()
            except OSError:  # not empty (something was written) or gone: keep it and what is above it
                break
        raise


def _process_umask() -> int:
    """The umask, read without changing it (os.umask sets it, which would race with threads creating files)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _process_umask()


def atomic_write(
    path: Path, data: str | bytes | Sequence[bytes], *, mode: int | None = None, durable: bool = True
) -> None:
    """Write `data` (or a sequence of byte strings, in turn) to `path` through a temp file and os.replace: readers
    see old or new. The file gets `mode`, else plain open()'s permissions (not mkstemp's 0600: goldens are shared).
    `durable=False` skips the fsync, for caches. An OSError becomes an InputError naming the path and the fix."""
    tmp_name = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as fh:
            if isinstance(data, str):
                fh.write(data.encode("utf-8"))
            elif isinstance(data, (bytes, bytearray, memoryview)):
                fh.write(data)
            else:
                fh.writelines(data)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.chmod(tmp_name, mode if mode is not None else 0o666 & ~_UMASK)
        os.replace(tmp_name, path)
        tmp_name = None
    except OSError as exc:
        raise os_error(exc, path, "write") from exc
    finally:
        if tmp_name is not None:
            try:
                os.unlink(tmp_name)
            except OSError:
                pass


def files_under(root: Path) -> list[str]:
    """Every file under root as a relative posix name, outside hidden folders (.git, .cache), in walk order."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        base = Path(dirpath)
        out += [(base / name).relative_to(root).as_posix() for name in sorted(filenames)]
    return out


def atomic_write_json(path: Path, data: Any, hint: str | None = None) -> None:
    """THE JSON writer: atomic, and refusing NaN or infinity (NonFiniteValue naming the file and the field path,
    with `hint`, the writer's fix) so no artifact holds a number no JSON reader accepts."""
    try:
        text = json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False, allow_nan=False)
    except ValueError:
        found = first_non_finite(data)
        if found is None:
            raise
        field, value = found
        raise NonFiniteValue(
            str(path), field, value, hint or "the stage computed a non-finite number: rerun it"
        ) from None
    atomic_write(path, text + "\n")


def first_non_finite(data: Any, field: str = "$") -> tuple[str, float] | None:
    """The path (`$.a[2].b`) and value of the first NaN or infinity in JSON-shaped `data`, else None."""
    if isinstance(data, float) and not math.isfinite(data):
        return field, data
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, (list, tuple)) else ()
    for key, value in items:
        found = first_non_finite(value, f"{field}[{key}]" if isinstance(key, int) else f"{field}.{key}")
        if found is not None:
            return found
    return None


def read_json(path: Path, kind: Any = Any, hint: str | None = None) -> Any:
    """A JSON file decoded into `kind` (serde.decode_json); a missing or malformed file is an InputError naming it."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError as exc:
        raise InputError(f"{path} does not exist", hint or "run the stage that writes it first") from exc
    except OSError as exc:
        raise os_error(exc, path, "read") from exc
    return serde.decode_json(
        raw, kind, str(path), hint or "rerun the stage that writes it (a crashed run can leave it broken)"
    )


def json_object(text: str, name: str, error: type[OnboardError], hint: str) -> dict[str, Any]:
    """`text` (the file `name`) parsed as a JSON object; else `error` naming the spot or the type found."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{name}: malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}", hint) from exc
    if not isinstance(doc, dict):
        raise error(f"{name}: expected a JSON object, found {type(doc).__name__}", f"fix {name}")
    return doc
