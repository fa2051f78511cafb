"""The identity of a repository's own code: what goldens record as their reference instead of a library version."""

from __future__ import annotations

import hashlib
from pathlib import Path

from onboard.errors import InputError


def code_hash(checkpoint: Path) -> str:
    """sha256 (hex) over the repository's *.py files: each file's relative name and bytes, in sorted name order.

    Files in subfolders count; caches (`__pycache__`) and hidden folders (`.git`, `.cache`) do not. Symlinks are
    followed (a hub cache snapshot is all symlinks into `blobs/`). Records read as "repository code sha256:<hex>".

    Raises:
        InputError: `checkpoint` is not a folder, or a *.py file cannot be read.
    """
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
    out = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        if any(part.startswith(".") or part == "__pycache__" for part in rel.parts[:-1]) or not path.is_file():
            continue
        out.append(rel.as_posix())
    return out
