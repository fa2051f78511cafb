"""TEST PROBES: small hostile-or-broken behaviours that tests/sandbox/ runs inside the worker.

They stand in for repository code that tries to reach the network, write outside its temp dir, hang, allocate
without bound or raise. They live in the package (not in tests/) because only `onboard.` functions may run in
the worker. Nothing else calls them.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any


def connect(addresses: list[list[Any]], timeout_s: float = 2.0) -> dict[str, str]:
    """Try a TCP connect to each (host, port): "connected" or the error text, keyed "host:port"."""
    out = {}
    for host, port in addresses:
        try:
            with socket.create_connection((host, int(port)), timeout=timeout_s):
                out[f"{host}:{port}"] = "connected"
        except OSError as exc:
            out[f"{host}:{port}"] = f"{type(exc).__name__}: {exc}"
    return out


def write(paths: list[str]) -> dict[str, str]:
    """Try to create each file: "written" (then removed again) or the error text, keyed by path.

    Key "own temp dir" is a file in the worker's own temp dir ($TMPDIR), which must stay writable.
    """
    out = {}
    targets = {path: path for path in paths}
    targets["own temp dir"] = os.path.join(os.environ.get("TMPDIR", "."), "probe")
    for key, path in targets.items():
        try:
            with open(path, "x") as fh:
                fh.write("written from the sandbox\n")
            os.unlink(path)
            out[key] = "written"
        except OSError as exc:
            out[key] = f"{type(exc).__name__}: {exc}"
    return out


def environment() -> dict[str, Any]:
    """What the worker sees of its environment and of the process it runs in."""
    import resource

    try:
        os.close(os.open("/dev/tty", os.O_RDWR))
        tty = "opened"
    except OSError as exc:
        tty = f"{type(exc).__name__}: {exc}"
    return {
        "env": dict(os.environ),
        "stdin_isatty": os.isatty(0),
        "controlling_tty": tty,
        "memory_limit": resource.getrlimit(resource.RLIMIT_AS)[0],
        "home_listing": sorted(os.listdir(os.path.expanduser("~"))),
    }


def sleep_forever() -> None:
    while True:
        time.sleep(3600)


def burn_cpu() -> None:
    while True:
        pass


def spawn_and_sleep(marker: str) -> None:
    """Start a detached grandchild (own session, `marker` in its command line), then hang: a wall-time kill must
    take the grandchild down too."""
    import subprocess
    import sys

    subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(3600)", marker],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    sleep_forever()


def allocate_without_bound(chunk_bytes: int = 64 << 20) -> None:
    """Keep 64 MiB zero-filled blocks (real, touched memory) until something stops it."""
    blocks = []
    while True:
        blocks.append(bytearray(chunk_bytes))


def fail(message: str) -> None:
    raise ValueError(message)


def unserializable() -> dict[str, Any]:
    return {"ids": {1, 2, 3}}


def echo(**kwargs: Any) -> dict[str, Any]:
    """Return what came in (tensors included): the codec round trip."""
    return kwargs
