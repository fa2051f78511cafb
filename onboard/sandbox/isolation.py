"""How the worker is isolated: bubblewrap, or nothing only when the user says so (--unsafe-no-sandbox).

bubblewrap (a maintained, audited tool) gives the worker this view:
- no network: a fresh network namespace (loopback down too); also fresh PID, IPC and UTS namespaces;
- the whole file system read-only, with the parent's HOME, /tmp, /var/tmp and /run hidden behind empty read-only
  tmpfs (secrets and Unix sockets such as a Docker socket live there; a socket ignores read-only mounts);
- the paths the worker needs back on top, read-only: the Python installation and import path, and the checkpoint
  (plus the targets of its symlinks: a hub cache snapshot links into `blobs/`);
- one writable folder: the call's own temp dir;
- no capabilities (as root too), no controlling terminal.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from onboard.errors import SandboxUnavailable

BUBBLEWRAP = "bubblewrap"
UNSAFE = "none (--unsafe-no-sandbox)"

INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`, Fedora: `dnf install bubblewrap`) and allow "
    "unprivileged user namespaces, or add --unsafe-no-sandbox to run the repository's code WITHOUT isolation "
    "(it gets this user's network and files)"
)


@dataclass(frozen=True)
class View:
    """The file-system view of one call: what is hidden, what comes back read-only, what is writable."""

    masks: tuple[str, ...]
    readable: tuple[str, ...]
    writable: str


def plan_view(workdir: Path, checkpoint: Path | None) -> View:
    """Masks and read-only binds for a call whose only writable folder is `workdir`."""
    masks = _outermost({_real(p) for p in _mask_candidates() if p.is_dir()})
    needed = {_real(p) for p in _python_paths()}
    if checkpoint is not None:
        needed |= _checkpoint_paths(checkpoint)
    # Only paths hidden by a mask need binding back (the rest of / is visible read-only already), and never a
    # whole mask or what contains one (a script run from /tmp or ~ must not bring /tmp or ~ back).
    hidden = {p for p in needed if Path(p).exists() and any(_under(p, m) for m in masks)}
    readable = _outermost({p for p in hidden if not any(_under(m, p) for m in masks)})
    return View(masks=tuple(masks), readable=tuple(readable), writable=_real(workdir))


def _mask_candidates() -> list[Path]:
    import tempfile

    out = [Path("/tmp"), Path("/var/tmp"), Path("/run"), Path("/dev/shm"), Path(tempfile.gettempdir())]
    home = Path(os.path.expanduser("~"))
    if home != Path("/"):
        out.append(home)
    if os.geteuid() == 0:
        out.append(Path("/root"))
    return out


def code_paths(entries: list[str]) -> list[str]:
    """The parent's sys.path entries the worker may import from: existing ones, never a Hugging Face modules cache
    (transformers adds one after a remote-code load): it would show other repositories' code and shadow the
    worker's own `transformers_modules`, breaking the repository's relative imports."""
    return [
        p for p in entries if p and os.path.exists(p) and not os.path.isdir(os.path.join(p, "transformers_modules"))
    ]


def _python_paths() -> list[Path]:
    paths = [Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix), Path(sys.executable).resolve().parent]
    # sys.path[0] is the parent's script folder or working directory (unless python -P): not the worker's business
    entries = sys.path if sys.flags.safe_path else sys.path[1:]
    paths += [Path(p) for p in code_paths(entries)]
    import onboard

    paths.append(Path(onboard.__file__).resolve().parent)
    return paths


def _checkpoint_paths(checkpoint: Path) -> set[str]:
    """The checkpoint folder and the folders its symlinks point into (a hub cache snapshot links into blobs/)."""
    paths = {_real(checkpoint)}
    root = Path(checkpoint)
    if root.is_dir():
        for path in root.rglob("*"):
            if path.is_symlink():
                target = path.resolve()
                paths.add(str(target if target.is_dir() else target.parent))
    return paths


def _real(path: Path | str) -> str:
    return os.path.realpath(path)


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _outermost(paths: set[str]) -> list[str]:
    """Sorted, without paths that lie inside another one of the set."""
    out: list[str] = []
    for path in sorted(paths):
        if not any(_under(path, kept) for kept in out):
            out.append(path)
    return out


# ---- bubblewrap -----------------------------------------------------------------------------------------------

_ROOT_READ_ONLY = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]


def bwrap_prefix(view: View) -> list[str]:
    """The bubblewrap command line that runs what follows it inside `view`."""
    args = ["bwrap", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    args += "--unshare-net --unshare-pid --unshare-ipc --unshare-uts --unshare-cgroup-try".split()
    args += _ROOT_READ_ONLY
    for mask in view.masks:
        args += ["--tmpfs", mask]
    for path in view.readable:
        args += ["--ro-bind", path, path]
    args += ["--bind", view.writable, view.writable]
    for mask in (*view.masks, "/dev"):  # last: the binds above need their mount points created first
        args += ["--remount-ro", mask]
    return [*args, "--chdir", view.writable, "--"]


def bubblewrap_problem() -> str | None:
    """None when bubblewrap runs a trivial command here, else why not."""
    exe = shutil.which("bwrap")
    return "`bwrap` is not installed (not on PATH)" if exe is None else _probe(exe)


@functools.cache
def _probe(exe: str) -> str | None:
    """Once per binary and process: namespaces may be disabled even where bwrap is installed."""
    probe = [exe, "--unshare-net", "--unshare-pid", "--die-with-parent", *_ROOT_READ_ONLY, "--", "true"]
    try:
        proc = subprocess.run(probe, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`bwrap` could not start: {exc}"
    if proc.returncode != 0:
        return f"`bwrap` cannot create namespaces here: {proc.stderr.strip()[-300:] or f'exit {proc.returncode}'}"
    return None


def choose_method(unsafe_no_sandbox: bool = False, method: str | None = None) -> str:
    """BUBBLEWRAP, or UNSAFE only when bubblewrap does not work and the user passed --unsafe-no-sandbox (it never
    turns off isolation that works). `method` forces one (UNSAFE needs unsafe_no_sandbox too). SandboxUnavailable
    when bubblewrap is needed and does not work."""
    if method not in (None, BUBBLEWRAP, UNSAFE):
        raise ValueError(f"unknown sandbox method {method!r}")
    if method == UNSAFE:
        if not unsafe_no_sandbox:
            raise ValueError("running without isolation needs unsafe_no_sandbox=True")
        return UNSAFE
    why = bubblewrap_problem()
    if why is None:
        return BUBBLEWRAP
    if unsafe_no_sandbox and method is None:
        return UNSAFE
    raise SandboxUnavailable(
        f"--trust-remote-code runs the repository's code only inside bubblewrap (no network, read-only checkpoint, "
        f"limits), and {why}",
        INSTALL_HINT,
    )
