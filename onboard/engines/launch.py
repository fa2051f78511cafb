"""A server process on loopback for the length of a `with` block: port, readiness, and nothing left running.

It runs in its own process group, stopped with its children on exit, on any exception, and on SIGTERM / SIGHUP to
this process; on Linux the kernel also sends it SIGTERM if this process dies without cleaning up.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from onboard.errors import InputError
from onboard.fsutil import make_dirs

HOST = "127.0.0.1"


class EngineStartError(InputError):
    """The engine is missing, could not bind its port, or did not become ready."""


def argv(flags: Mapping[str, object]) -> list[str]:
    """`--flag value` words of a command line."""
    return [str(word) for flag, value in flags.items() for word in (flag, value)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def check_port(port: int) -> None:
    """Raise EngineStartError naming the port when something already listens on it (or it cannot be bound)."""
    with socket.socket() as s:
        # As the servers do: a port left in TIME_WAIT by a stopped server is free; only a live listener is taken.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError as exc:
            raise EngineStartError(
                f"port {port} on {HOST} is taken ({exc.strerror})",
                "stop what listens there, pass another --engine-port, or omit it to pick a free port",
            ) from exc


def _die_with_parent() -> None:  # pragma: no cover (runs in the child between fork and exec)
    os.setsid()
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _raise_exit(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


@contextlib.contextmanager
def serve_process(
    cmd: Sequence[str],
    *,
    port: int,
    ready_path: str,
    log: Path,
    name: str,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
) -> Iterator[str]:
    """Start `cmd` (which must listen on `port`), wait until GET `ready_path` answers 200, yield the base URL."""
    check_port(port)
    make_dirs(log.parent)
    previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    with log.open("w") as out:
        proc = subprocess.Popen(
            list(cmd), stdout=out, stderr=subprocess.STDOUT, env=dict(env or os.environ), preexec_fn=_die_with_parent
        )  # noqa: PLW1509 (setsid + death signal, nothing else)
    url = f"http://{HOST}:{port}"
    try:
        for sig in previous:
            signal.signal(sig, _raise_exit)
        _wait_ready(url + ready_path, proc, log, name, timeout_s)
        yield url
    finally:
        stop(proc)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _wait_ready(url: str, proc: subprocess.Popen, log: Path, name: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise EngineStartError(
                f"{name} exited with code {proc.returncode} before serving; log tail:\n{tail(log)}",
                f"see the whole log in {log}",
            )
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:  # noqa: S310 (loopback URL we built)
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise EngineStartError(f"{name} not ready after {timeout_s:g} s; log tail:\n{tail(log)}", f"see {log}")


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the whole process group (children too, even when the leader already exited), SIGKILL after 30 s."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def tail(log: Path) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-30:])
    except OSError:
        return "(no log)"
