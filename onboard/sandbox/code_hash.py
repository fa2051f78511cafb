"""The identity of a repository's own code: what goldens record as their reference instead of a library version."""

from __future__ import annotations

import hashlib
from pathlib import Path

from onboard.errors import InputError
from onboard.fsutil import files_under


def code_hash(checkpoint: Path) -> str:
    """sha256 (hex) over the repository's *.py files (subfolders too, not `__pycache__` or hidden folders;
    symlinks followed, as a hub snapshot links into `blobs/`): each relative name and its bytes, in name order.
    InputError when `checkpoint` is not a folder or a file cannot be read."""
    root = Path(checkpoint)
    if not root.is_dir():
        raise InputError(f"cannot hash the repository code of {root}: not a folder", "pass the checkpoint folder")
    digest = hashlib.sha256()
    for name in sorted(_python_files(root)):
        path = root / name
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise InputError(f"cannot read {path}: {exc.strerror or exc}", "check the file's permissions") from exc
        # name and length before the bytes: ("a.py", "xb") and ("a.pyx", "b") cannot hash alike
        digest.update(name.encode("utf-8") + b"\0" + str(len(data)).encode() + b"\0" + data)
    return digest.hexdigest()


def _python_files(root: Path) -> list[str]:
    names = (n for n in files_under(root) if n.endswith(".py") and "__pycache__" not in n.split("/")[:-1])
    return [n for n in names if (root / n).is_file()]
