"""run_isolated: call one of our functions in a sandboxed worker process and get its data back.

The parent writes WORKDIR/request.json, starts `python -m onboard.sandbox.worker WORKDIR` inside the isolation,
waits at most Limits.wall_s and reads WORKDIR/result.json (+ tensors). The worker's environment is scrubbed: a fresh
HOME and HF cache in WORKDIR, offline, no tokens or proxies, and the parent's torch thread count.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onboard.errors import ReferenceUnusable, SandboxError
from onboard.sandbox import isolation
from onboard.sandbox.codec import decode, encode
from onboard.sandbox.protocol import INPUTS, LOG, OUTPUTS, REQUEST, RESULT, TargetRefused, check_target

GiB = 1 << 30
# Variables the worker inherits: locale, search path, and what changes numerics or threading. Nothing else
# (no HF_TOKEN, no *_proxy, no cloud credentials).
_KEEP_NAMES = {"PATH", "LANG", "LANGUAGE", "TZ", "LD_LIBRARY_PATH", "PYTHONHASHSEED", "TRITON_INTERPRET"}
_KEEP_PREFIXES = ("LC_", "OMP_", "MKL_", "KMP_", "OPENBLAS_", "DNNL_", "ONEDNN_", "ATEN_", "TORCH_", "PYTORCH_")


class UnsafeSandboxWarning(UserWarning):
    """Repository code ran without isolation because the user passed --unsafe-no-sandbox."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of one worker; the defaults fit tiny and small models."""

    wall_s: float = 600  # then the parent kills the worker and everything it started
    cpu_s: int = 3600  # all threads together (RLIMIT_CPU)
    memory_bytes: int = 8 * GiB  # address space (RLIMIT_AS)
    file_bytes: int = 8 * GiB  # largest file the worker may write (RLIMIT_FSIZE)


def run_isolated(
    target: str,
    kwargs: dict[str, Any] | None = None,
    checkpoint: Path | None = None,
    limits: Limits | None = None,
    unsafe_no_sandbox: bool = False,
    *,
    threads: int | None = None,
    method: str | None = None,
) -> Any:
    """Call `target` ("onboard.module:function", anything else is refused) with `kwargs` (JSON data, tensors
    anywhere inside) in an isolated worker and return what it returned (tensors on CPU).

    `checkpoint` is visible read-only inside. `unsafe_no_sandbox`: run unisolated when bubblewrap does not work,
    with an UnsafeSandboxWarning. `threads`: torch threads in the worker (default: the parent's). `method`: force
    isolation.BUBBLEWRAP or UNSAFE. Raises SandboxUnavailable (what to install) or SandboxError (the target
    raised, a limit stopped it, it was refused, or it died without a result).
    """
    limits = limits or Limits()
    try:
        check_target(target)
    except TargetRefused as exc:
        raise SandboxError("refused", str(exc), "only functions of the onboard package run in the sandbox") from exc
    chosen = isolation.choose_method(unsafe_no_sandbox, method)
    if chosen == isolation.UNSAFE:
        warnings.warn(
            f"running {target} WITHOUT isolation (--unsafe-no-sandbox): the repository's code has this "
            "user's network and files",
            UnsafeSandboxWarning,
            stacklevel=2,
        )
    import onboard

    workdir = Path(tempfile.mkdtemp(prefix="onboard-sandbox-"))
    try:
        for sub in ("home", "tmp"):
            (workdir / sub).mkdir()
        request = {
            "target": target,
            "kwargs": encode(kwargs or {}, workdir / INPUTS, "kwargs"),
            "limits": {name: int(getattr(limits, name)) for name in ("cpu_s", "memory_bytes", "file_bytes")},
            "onboard_root": os.path.realpath(Path(onboard.__file__).parent),
        }
        (workdir / REQUEST).write_text(json.dumps(request))
        command = [sys.executable, "-P", "-B", "-m", "onboard.sandbox.worker", str(workdir)]
        if chosen == isolation.BUBBLEWRAP:
            view = isolation.plan_view(workdir, Path(checkpoint) if checkpoint else None)
            command = isolation.bwrap_prefix(view) + command
        env = worker_env(workdir, threads)
        with open(workdir / LOG, "wb") as log:
            proc = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, cwd=workdir, start_new_session=True
            )
            timed_out = _wait(proc, limits.wall_s)
        return _outcome(workdir, proc.returncode, timed_out, limits, target)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def isolation_method(unsafe_no_sandbox: bool = False) -> str:
    """What run_isolated will use here, for reports (SandboxUnavailable as run_isolated would)."""
    return isolation.choose_method(unsafe_no_sandbox)


def worker_env(workdir: Path, threads: int | None) -> dict[str, str]:
    """The worker's whole environment: kept variables, a fresh HOME and HF cache under `workdir`, offline."""
    env = {k: v for k, v in os.environ.items() if k in _KEEP_NAMES or k.startswith(_KEEP_PREFIXES)}
    home, cache = workdir / "home", workdir / "home" / ".cache"
    env.update(
        {
            "HOME": str(home),
            "TMPDIR": str(workdir / "tmp"),
            "XDG_CACHE_HOME": str(cache),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "HF_HOME": str(cache / "huggingface"),
            "HF_HUB_CACHE": str(cache / "huggingface" / "hub"),
            "TRANSFORMERS_CACHE": str(cache / "huggingface" / "hub"),
            "HF_MODULES_CACHE": str(cache / "huggingface" / "modules"),
            "TORCH_HOME": str(cache / "torch"),
            "TRITON_CACHE_DIR": str(cache / "triton"),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_HUB_DISABLE_UPDATE_CHECK": "1",
            "PYTHONNOUSERSITE": "1",
            "PYTHONPATH": os.pathsep.join(isolation.code_paths(sys.path)),
        }
    )
    threads = threads if threads is not None else _parent_threads()
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    return env


def _parent_threads() -> int | None:
    """torch's thread count here if torch is loaded (else the worker's torch picks the same default)."""
    torch = sys.modules.get("torch")
    return torch.get_num_threads() if torch is not None and hasattr(torch, "get_num_threads") else None


def _wait(proc: subprocess.Popen, wall_s: float) -> bool:
    """Wait for the worker; past `wall_s` kill its whole process group. True when it was killed for time."""
    try:
        proc.wait(timeout=wall_s)
        return False
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # bwrap dies, and with it the worker's PID namespace
        except ProcessLookupError:
            pass
        proc.wait()
        return True


def _outcome(workdir: Path, returncode: int, timed_out: bool, limits: Limits, target: str) -> Any:
    if timed_out:
        raise SandboxError(
            "wall",
            f"{target} was stopped at the wall-time limit of {limits.wall_s:g} s "
            "(Limits.wall_s): the repository code did not finish in time",
            "if the model legitimately needs longer, raise the limit; otherwise the repository "
            "code hangs (a sleep, a lock, a download attempt)",
        )
    result = _read_result(workdir)
    if result is None:
        raise _died(returncode, limits, target, _log_tail(workdir))
    if result.get("ok") is True:
        try:
            return decode(result.get("value"), workdir / OUTPUTS)
        except (OSError, ValueError) as exc:
            raise SandboxError("protocol", f"the worker's result for {target} is unreadable: {exc}") from exc
    return _raise_failure(result, limits, target)


def _read_result(workdir: Path) -> dict[str, Any] | None:
    try:
        result = json.loads((workdir / RESULT).read_text())
    except (OSError, ValueError):
        return None
    return result if isinstance(result, dict) else None


def _raise_failure(result: dict[str, Any], limits: Limits, target: str) -> Any:
    kind = str(result.get("kind", "raised"))
    error = f"{result.get('type', 'Exception')}: {result.get('message', '')}"
    remote = str(result.get("traceback", ""))
    if kind == "memory":
        raise SandboxError(
            "memory",
            f"{target} ran out of memory: the limit is {_gib(limits.memory_bytes)} of "
            f"address space (Limits.memory_bytes) — {error}",
            "if the model legitimately needs more, raise the memory limit",
            remote,
        )
    if kind == "refused":
        raise SandboxError("refused", str(result.get("message")), "only functions of the onboard package run there")
    if kind == ReferenceUnusable.verdict:  # the worker's soundness check (onboard/reference_health.py)
        raise ReferenceUnusable(str(result.get("cause")), str(result.get("message")), result.get("hint"))
    raise SandboxError(
        kind,
        f"{target} failed in the sandbox: {error}\n--- worker traceback (last lines) ---\n{remote}",
        _who_raised(remote),
        remote,
    )


def _who_raised(traceback_text: str) -> str:
    """Whose code the innermost frame belongs to, so the hint blames the right party."""
    import re

    import onboard

    files = re.findall(r'File "([^"]+)"', traceback_text)
    innermost = os.path.realpath(files[-1]) if files else ""
    if innermost.startswith(os.path.realpath(Path(onboard.__file__).parent) + os.sep):
        return (
            "onboard's own code raised inside the worker (a bug in onboard, not in the repository): see the traceback"
        )
    if "site-packages" in innermost or "dist-packages" in innermost:
        return "a library raised while loading or running the repository's model: see the traceback above"
    return "the repository's code raised: see the traceback above"


def _died(returncode: int, limits: Limits, target: str, log_tail: str) -> SandboxError:
    """The worker ended without a result: name the limit that stopped it, or the signal."""
    sig = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else 0
    tail = f"\n--- worker output (last lines) ---\n{log_tail}" if log_tail else ""
    if sig == signal.SIGXCPU or (sig == signal.SIGKILL and "CPU time limit" in log_tail):
        return SandboxError(
            "cpu",
            f"{target} was stopped at the CPU-time limit of {limits.cpu_s} s (Limits.cpu_s){tail}",
            "raise the CPU-time limit if the model legitimately needs it",
        )
    if sig == signal.SIGXFSZ:
        return SandboxError(
            "file_size",
            f"{target} wrote a file larger than {_gib(limits.file_bytes)} (Limits.file_bytes){tail}",
            "raise the file-size limit if that output is legitimate",
        )
    if sig == signal.SIGKILL or "bad_alloc" in log_tail or "Cannot allocate memory" in log_tail:
        return SandboxError(
            "memory",
            f"{target} was killed (likely out of memory: the limit is "
            f"{_gib(limits.memory_bytes)}, Limits.memory_bytes, or the system ran out){tail}",
            "raise the memory limit, or free memory on this machine",
        )
    how = f"signal {_signal_name(sig)}" if sig else f"exit status {returncode}"
    return SandboxError(
        "crashed",
        f"{target}: the sandboxed worker ended with {how} and no result{tail}",
        "rerun with ONBOARD_DEBUG=1; the worker output above says where it stopped",
    )


def _log_tail(workdir: Path, max_bytes: int = 4000) -> str:
    try:
        with open(workdir / LOG, "rb") as fh:
            fh.seek(max(0, os.fstat(fh.fileno()).st_size - max_bytes))
            return fh.read().decode("utf-8", "replace").strip()
    except OSError:
        return ""


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return str(sig)


def _gib(n: int) -> str:
    return f"{n / GiB:.3g} GiB"
