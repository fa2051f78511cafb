"""Where a model's onboarding files live: `<workspace>/onboarding/<slug>/<revision>/`, and slug ↔ repo id."""

from __future__ import annotations

from pathlib import Path

from onboard.errors import InputError

STAGE_MARKERS = ("profile.json", "inspect.json", "checklist.json")


def slug_for(repo_or_folder: str) -> str:
    """`org/name` → `org__name`; a local folder → its name."""
    if Path(repo_or_folder).is_dir() or repo_or_folder.startswith((".", "/")):
        return Path(repo_or_folder).resolve().name
    return repo_or_folder.strip("/").replace("/", "__")


def model_id(slug: str) -> str:
    """The registry's model name: the hub repo id for `org__name` slugs, else the slug itself."""
    return slug.replace("__", "/", 1) if "__" in slug else slug


def model_dir(workspace: Path, slug: str) -> Path:
    return workspace / "onboarding" / slug


def revision_dirs(workspace: Path, slug: str) -> list[Path]:
    """Revision folders of a model that hold stage results, most recently written last."""
    root = model_dir(workspace, slug)
    if not root.is_dir():
        return []
    dirs = [d for d in root.iterdir() if d.is_dir() and any((d / m).is_file() for m in STAGE_MARKERS)]
    return sorted(dirs, key=_last_write)


def _last_write(d: Path) -> float:
    return max((f.stat().st_mtime for f in d.glob("*.json")), default=d.stat().st_mtime)


def resolve_revision(workspace: Path, slug: str, revision: str | None = None) -> Path:
    """The revision folder to act on: `revision` (a full name or unique prefix), else the most recent run."""
    dirs = revision_dirs(workspace, slug)
    if not dirs:
        raise InputError(
            f"no onboarding results for {slug!r} under {model_dir(workspace, slug)}",
            "run `onboard new-model SOURCE` first, or pass --workspace with the folder that holds onboarding/",
        )
    if revision is None:
        return dirs[-1]
    matches = [d for d in dirs if d.name == revision] or [d for d in dirs if d.name.startswith(revision)]
    if len(matches) != 1:
        names = ", ".join(d.name for d in dirs)
        what = "matches several" if matches else "matches none"
        raise InputError(f"revision {revision!r} {what} of {slug}'s runs", f"choose one of: {names}")
    return matches[0]
