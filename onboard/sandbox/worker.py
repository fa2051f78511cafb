"""The sandboxed worker: `python -m onboard.sandbox.worker WORKDIR`, started by run_isolated.

Limits first, then the target (a function of our own `onboard` package, which may load the repository's code) is
imported and called. The outcome goes to WORKDIR/result.json (+ outputs.safetensors).
"""

from __future__ import annotations

import importlib
import json
import os
import resource
import sys
import traceback
from pathlib import Path
from typing import Any

from onboard.errors import ReferenceUnusable
from onboard.fsutil import atomic_write
from onboard.sandbox.protocol import IN_WORKER_ENV, INPUTS, OUTPUTS, REQUEST, RESULT, TargetRefused, check_target

TRACEBACK_LINES = 20  # how much of the remote traceback comes back in the error message


def _resolve(target: str, onboard_root: str) -> Any:
    module_name, function = check_target(target)
    module = importlib.import_module(module_name)
    origin = os.path.realpath(getattr(module, "__file__", "") or "")
    if not origin.startswith(onboard_root.rstrip("/") + "/"):  # an `onboard` shadowed on sys.path is not ours
        raise TargetRefused(f"refused target {target!r}: {module_name} was imported from {origin}, not {onboard_root}")
    fn = getattr(module, function, None)
    if not callable(fn):
        raise TargetRefused(f"refused target {target!r}: {module_name} has no function {function!r}")
    return fn


def apply_limits(limits: dict[str, int]) -> None:
    """rlimits on this process and its children (soft CPU limit -> SIGXCPU, hard 5 s later); only ever tightened."""
    _set(resource.RLIMIT_CPU, limits["cpu_s"], limits["cpu_s"] + 5)
    _set(resource.RLIMIT_AS, limits["memory_bytes"], limits["memory_bytes"])
    _set(resource.RLIMIT_FSIZE, limits["file_bytes"], limits["file_bytes"])
    _set(resource.RLIMIT_CORE, 0, 0)


def _set(which: int, soft: int, hard: int) -> None:
    _, current_hard = resource.getrlimit(which)
    if current_hard != resource.RLIM_INFINITY:
        soft, hard = min(soft, current_hard), min(hard, current_hard)
    resource.setrlimit(which, (soft, hard))


def _failure(kind: str, exc: BaseException) -> dict[str, Any]:
    lines = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip().splitlines()
    return {
        "ok": False,
        "kind": kind,
        "type": type(exc).__name__,
        "message": str(exc)[:2000],
        "traceback": "\n".join(lines[-TRACEBACK_LINES:]),
    }


def _is_memory_error(exc: BaseException) -> bool:
    text = str(exc)
    return isinstance(exc, MemoryError) or any(
        s in text for s in ("can't allocate memory", "Cannot allocate memory", "std::bad_alloc", "out of memory")
    )


def run(workdir: Path) -> dict[str, Any]:
    """Run the request in `workdir`; the result dict (also on failure of the target)."""
    request = json.loads((workdir / REQUEST).read_text())
    apply_limits(request["limits"])
    from onboard.sandbox.codec import decode, encode

    try:
        fn = _resolve(request["target"], request["onboard_root"])
    except TargetRefused as exc:
        return _failure("refused", exc)
    try:
        value = fn(**decode(request["kwargs"], workdir / INPUTS))
        return {"ok": True, "value": encode(value, workdir / OUTPUTS)}
    except ReferenceUnusable as exc:  # a verdict on the reference, not a crash: crosses back as itself
        return _failure("reference-unusable", exc) | {"cause": exc.cause, "hint": exc.hint}
    except BaseException as exc:  # noqa: BLE001  (SystemExit from repository code is a failure too)
        return _failure("memory" if _is_memory_error(exc) else "raised", exc)


def main(argv: list[str]) -> None:
    workdir = Path(argv[1]) if len(argv) > 1 else Path.cwd()
    os.environ[IN_WORKER_ENV] = "1"
    result = run(workdir)
    try:
        atomic_write(workdir / RESULT, json.dumps(result))
    except (MemoryError, TypeError, ValueError) as exc:  # the worker's own last resort: say why in a few bytes
        message = f"the result could not be written: {exc}"[:500]
        fallback = {"ok": False, "kind": "protocol", "type": type(exc).__name__, "message": message, "traceback": ""}
        atomic_write(workdir / RESULT, json.dumps(fallback))
    sys.stdout.flush(), sys.stderr.flush()
    os._exit(0)  # not sys.exit: threads the repository code left running must not delay or alter the outcome


if __name__ == "__main__":
    main(sys.argv)
