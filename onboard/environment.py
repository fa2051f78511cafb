"""Where a figure came from (hardware: identical weights give other numbers on other kernels and machines), and
resolving a SOURCE to a local folder."""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path

from onboard.errors import InputError, SourceNotFound

# Files a reference load needs; weights as safetensors only (never pickles).
# *.py: a repository-code reference (auto_map) needs its files; they are only ever imported in the sandbox worker.
SNAPSHOT_PATTERNS = ["*.json", "*.safetensors", "*.model", "*.tiktoken", "*.txt", "*.jinja", "*.py"]


def hardware() -> dict[str, object]:
    """CPU/GPU description. Imports torch only if it is already loaded (keeps `--help` paths light)."""
    info: dict[str, object] = {
        "machine": platform.machine(),
        "system": platform.system(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
    }
    torch = sys.modules.get("torch")
    if torch is not None:
        info["torch_threads"] = torch.get_num_threads()
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
            info["gpu_count"] = torch.cuda.device_count()
    return info


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def slug(source: str) -> str:
    """golden_outputs/<slug>: `org__name` when the repo id is known (onboard/checkpoint_id.py), else the folder name."""
    from onboard.checkpoint_id import golden_key

    return golden_key(source)


def require_loadable(path: Path) -> None:
    """A clone without git-lfs: every pointer among the files a load of the checkpoint reads (SNAPSHOT_PATTERNS) is
    named, with the fix (git lfs pull …), before anything parses one (safetensors would call a pointer's text a
    header too large)."""
    from fnmatch import fnmatch

    from onboard.lfs import files_under, require_real_files

    needed = [f for f in files_under(path) if any(fnmatch(f.rsplit("/", 1)[-1], p) for p in SNAPSHOT_PATTERNS)]
    require_real_files(path, needed)


def resolve_local(source: str, revision: str | None = None) -> Path:
    """A local folder for SOURCE: the folder itself, or a hub snapshot (config, tokenizer, safetensors only)."""
    path = Path(source)
    if path.is_dir():
        require_loadable(path)
        if not (path / "config.json").is_file():
            raise InputError(f"{path}: no config.json", "point SOURCE at a transformers checkpoint folder")
        return path
    if path.exists() or source.startswith((".", "/")) or source.count("/") != 1:
        raise SourceNotFound(f"{source}: not a checkpoint folder or hub repo id", "pass a folder or ORG/NAME")
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(source, revision=revision, allow_patterns=SNAPSHOT_PATTERNS))
    except Exception as exc:  # hub errors come in many types; all mean the same to the user
        raise SourceNotFound(
            f"{source}: could not download the checkpoint ({type(exc).__name__}: {exc})",
            "check the repo id, --revision, network access or HF_TOKEN; or pass a local folder",
        ) from exc
