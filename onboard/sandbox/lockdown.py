"""The file-system view and capability drop for the `unshare` method, done by the worker on itself.

`unshare` gives the worker fresh namespaces (network, mount, PID, IPC, UTS; a user namespace when not root) and
nothing else. Before the worker imports anything it was asked to run, `lock_down` builds the same view bubblewrap
builds (see isolation.py): tmpfs over the masked folders, the needed paths bound back, every mount read-only but
the call's temp dir, then all capabilities dropped so nothing can remount them. Linux only; plain syscalls via ctypes.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
from pathlib import Path

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC, MS_PRIVATE, MS_RELATIME = 1024, 2048, 4096, 16384, 1 << 18, 1 << 21
# mountinfo per-mount options -> flags a remount must keep (in a user namespace they are locked: EPERM otherwise)
_KEPT_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME,
               "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME}  # fmt: skip
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 38, 47, 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


class LockdownError(RuntimeError):
    """The view could not be built: the worker must not run the target."""


_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, doing: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{doing}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


def lock_down(masks: list[str], readable: list[str], writable: str) -> None:
    """Build the view and drop every capability. Raises LockdownError when any step fails."""
    try:
        _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing we do here propagates back to the parent's mounts
        # O_PATH handles first: after the tmpfs covers them, the paths are reachable only through these.
        handles = {path: os.open(path, os.O_PATH) for path in [*readable, writable]}
        for mask in masks:
            _mount("tmpfs", mask, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
        for path, fd in handles.items():
            _make_mount_point(Path(path), is_dir=os.path.isdir(f"/proc/self/fd/{fd}"))
            _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
            os.close(fd)
        _remount_all_read_only(except_path=writable)
        _drop_capabilities()
    except OSError as exc:
        raise LockdownError(f"the unshare sandbox could not be set up: {exc.strerror or exc}") from exc
    _assert_not_writable(["/", *masks, *readable])


def _assert_not_writable(folders: list[str]) -> None:
    """The view is checked, not assumed: a file created in any of `folders` means the lockdown failed."""
    for folder in folders:
        if not os.path.isdir(folder):
            continue
        probe = os.path.join(folder, f".onboard-lockdown-probe-{os.getpid()}")
        try:
            os.close(os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except OSError:
            continue
        os.unlink(probe)
        raise LockdownError(f"the unshare sandbox left {folder} writable")


def _make_mount_point(path: Path, is_dir: bool) -> None:
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    if is_dir:
        path.mkdir()
    else:
        path.touch()


def _mountinfo() -> list[tuple[str, set[str]]]:
    """(mount point, per-mount options) of every mount, in mount order."""
    out = []
    for line in Path("/proc/self/mountinfo").read_bytes().splitlines():
        fields = line.split(b" ")
        # the kernel writes space, tab, newline and backslash in paths as octal escapes (\\040)
        point = re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), fields[4])
        out.append((os.fsdecode(point), set(fields[5].decode().split(","))))
    return out


def _remount_all_read_only(except_path: str) -> None:
    for point, options in _mountinfo():
        if point == except_path:
            continue
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY
        for option, flag in _KEPT_FLAGS.items():
            if option in options:
                flags |= flag
        try:
            _mount(None, point, None, flags)
        except OSError as exc:
            # ENOENT: a mount now hidden under a tmpfs mask (unreachable); a read-only mount may refuse the remount
            if exc.errno == errno.ENOENT or "ro" in options:
                continue
            raise


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _drop_capabilities() -> None:
    """No capability left (bounding set, ambient, effective/permitted/inheritable) and no way to regain one."""
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # EINVAL on kernels without ambient caps
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            if ctypes.get_errno() == errno.EINVAL:
                break  # past the last capability this kernel knows
            _check(-1, f"prctl(CAPBSET_DROP, {cap})")
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), data), "capset")
