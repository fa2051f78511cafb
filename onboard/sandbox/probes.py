"""Worker functions only tests and benchmarks run: hostile or broken behaviours standing in for repository code, and
a causal LM's logits with timings. In the package, not in tests/, because the worker runs only `onboard` functions."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from typing import Any

from onboard.sandbox.protocol import require_worker


def _attempt(success: str, action: Callable[..., object], *args: Any) -> str:
    """`success`, or the error text of the OSError `action(*args)` raised."""
    try:
        action(*args)
        return success
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"


def connect(addresses: list[list[Any]], timeout_s: float = 2.0) -> dict[str, str]:
    """Try a TCP connect to each (host, port), keyed "host:port"."""

    def once(host: str, port: int) -> None:
        socket.create_connection((host, port), timeout=timeout_s).close()

    return {f"{host}:{port}": _attempt("connected", once, host, int(port)) for host, port in addresses}


def write(paths: list[str]) -> dict[str, str]:
    """Try to create (then remove) each file, keyed by path; "own temp dir" is one in $TMPDIR."""

    def create(path: str) -> None:
        with open(path, "x") as fh:
            fh.write("written from the sandbox\n")
        os.unlink(path)

    targets = {path: path for path in paths}
    targets["own temp dir"] = os.path.join(os.environ.get("TMPDIR", "."), "probe")
    return {key: _attempt("written", create, path) for key, path in targets.items()}


def environment() -> dict[str, Any]:
    """What the worker sees of its environment and of the process it runs in."""
    import resource

    return {
        "env": dict(os.environ),
        "stdin_isatty": os.isatty(0),
        "controlling_tty": _attempt("opened", lambda: os.close(os.open("/dev/tty", os.O_RDWR))),
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
    """Start a detached grandchild (`marker` in its command line), then hang: a wall-time kill must take it too."""
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
    blocks = []
    while True:
        blocks.append(bytearray(chunk_bytes))


def fail(message: str) -> None:
    raise ValueError(message)


def unserializable() -> dict[str, Any]:
    return {"ids": {1, 2, 3}}


def echo(**kwargs: Any) -> dict[str, Any]:
    return kwargs


def logits(
    checkpoint: str,
    input_ids: list[list[int]],
    dtype: str = "float32",
    repeats: int = 1,
    attn_implementation: str | None = None,
) -> dict[str, Any]:
    """The logits [batch, seq, vocab] of `input_ids` (rows of equal length) from AutoModelForCausalLM in `dtype`,
    with load_s, forward_s (one per repeat, same input; taken here, so process start and imports do not count),
    torch threads and the transformers version."""
    require_worker("onboard.sandbox.probes.logits")
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    start = time.perf_counter()
    options = {"dtype": getattr(torch, dtype), "local_files_only": True}
    options |= {"attn_implementation": attn_implementation} if attn_implementation else {}
    # trust_remote_code=True only here, inside the sandbox worker (require_worker above)
    model = AutoModelForCausalLM.from_pretrained(checkpoint, trust_remote_code=True, **options).eval()
    load_s = time.perf_counter() - start
    ids = torch.tensor(input_ids, dtype=torch.long)
    forward_s = []
    with torch.inference_mode():
        for _ in range(max(1, repeats)):
            start = time.perf_counter()
            out = model(input_ids=ids).logits
            forward_s.append(time.perf_counter() - start)
    threads, version = torch.get_num_threads(), transformers.__version__
    return {"logits": out, "load_s": load_s, "forward_s": forward_s, "threads": threads, "transformers": version}
