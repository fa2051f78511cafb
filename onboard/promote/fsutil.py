"""File writes that never leave half a file, and OS errors turned into messages that say what to do."""

from __future__ import annotations

import errno
import functools
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from onboard.errors import InputError

P = ParamSpec("P")
R = TypeVar("R")

# errno -> what to tell the person. Data, so every writer in the package says the same thing.
_OS_HINTS: dict[int, str] = {
    errno.ENOSPC: "the disk is full: free space (or point --workspace/--registry elsewhere) and rerun",
    errno.EDQUOT: "the disk quota is exhausted: free space (or point --workspace/--registry elsewhere) and rerun",
    errno.EACCES: "no permission to write there: fix the permissions or choose another path",
    errno.EPERM: "no permission to write there: fix the permissions or choose another path",
    errno.EROFS: "that file system is read-only: choose a writable path",
    errno.ENOTDIR: "a parent of that path is a file, not a folder: choose another path",
    errno.EISDIR: "that path is a folder: give a file path",
    errno.EEXIST: "a file is in the way where a folder is needed: choose another path",
}


def os_error(exc: OSError, path: Path | str, doing: str) -> InputError:
    """An InputError naming the path and the fix for a failed file operation."""
    why = exc.strerror or str(exc)
    hint = _OS_HINTS.get(exc.errno or 0, "check the path and rerun")
    return InputError(f"cannot {doing} {path}: {why}", hint)


def clean_os_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Decorator for public entry points: a stray OSError (unreadable workspace, …) becomes an InputError."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except OSError as exc:
            raise os_error(exc, exc.filename or "the workspace", "use") from exc

    return wrapper


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` to `path` through a temp file in the same folder and os.replace: readers see old or new."""
    tmp_name = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
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


def atomic_write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False) + "\n")


def read_json(path: Path) -> Any:
    """Parse a JSON file; a missing or malformed file is an InputError naming it."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise InputError(f"{path} does not exist", "run the stage that writes it first") from exc
    except OSError as exc:
        raise os_error(exc, path, "read") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})",
            "rerun the stage that writes it (a crashed run can leave it broken)",
        ) from exc
