"""run_isolated: call one of our functions in a sandboxed worker process and get its data back.

The parent writes WORKDIR/request.json, starts `python -m onboard.sandbox.worker WORKDIR` inside the isolation
(isolation.py), waits at most Limits.wall_s, then reads WORKDIR/result.json (+ tensors). The worker runs with a
scrubbed environment: a fresh HOME and Hugging Face cache inside WORKDIR, offline, no tokens, no proxies, stdin
from /dev/null, and the parent's torch thread count (so its forward is as fast as one in process).
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

from onboard.errors import SandboxError
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
    """Resource limits of one worker. Defaults fit tiny and small models (import of torch + transformers ≈ 1 GiB
    of address space); raise them for real checkpoints.

    Attributes:
        wall_s: wall-clock seconds before the parent kills the worker (and everything it started).
        cpu_s: CPU seconds, all threads together (RLIMIT_CPU).
        memory_bytes: address space (RLIMIT_AS): an allocation past it fails with a memory error.
        file_bytes: largest file the worker may write (RLIMIT_FSIZE): bounds what it can put in its temp dir.
    """

    wall_s: float = 600
    cpu_s: int = 3600
    memory_bytes: int = 8 * GiB
    file_bytes: int = 8 * GiB


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
    """Call `target` ("onboard.module:function") with `kwargs` in an isolated worker; return what it returned.

    Args:
        target: a function of the onboard package; anything else is refused before a process starts.
        kwargs: JSON data (paths as str), torch tensors allowed anywhere inside.
        checkpoint: made visible read-only inside the worker (also when it sits in a hidden folder such as /tmp).
        limits: wall time, CPU time, memory and file size (defaults: Limits()).
        unsafe_no_sandbox: the user passed --unsafe-no-sandbox: run without isolation when none can be set up
            (an UnsafeSandboxWarning is issued; the caller reports it).
        threads: torch intra-op threads in the worker; default: the parent's torch.get_num_threads() when torch is
            loaded, else the same default torch would pick in the parent.
        method: force isolation.BUBBLEWRAP or isolation.UNSAFE: tests and diagnostics.

    Returns:
        The function's return value (JSON data, tensors restored as torch tensors on CPU).

    Raises:
        SandboxUnavailable: bubblewrap does not work here and unsafe_no_sandbox is False (says what to install).
        SandboxError: the worker failed: the target raised (remote traceback's last lines in the message), a limit
            stopped it (named), it was refused, or it died without a result.
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
    workdir = Path(tempfile.mkdtemp(prefix="onboard-sandbox-"))
    try:
        return _call(workdir, chosen, target, kwargs or {}, checkpoint, limits, threads)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def isolation_method(unsafe_no_sandbox: bool = False) -> str:
    """What run_isolated will use here: "bubblewrap" or "none (--unsafe-no-sandbox)" (for reports).

    Raises:
        SandboxUnavailable: as run_isolated would.
    """
    return isolation.choose_method(unsafe_no_sandbox)


def _call(
    workdir: Path,
    method: str,
    target: str,
    kwargs: dict[str, Any],
    checkpoint: Path | None,
    limits: Limits,
    threads: int | None,
) -> Any:
    import onboard

    onboard_root = os.path.realpath(Path(onboard.__file__).parent)
    view = isolation.plan_view(workdir, Path(checkpoint) if checkpoint else None)
    for sub in ("home", "tmp"):
        (workdir / sub).mkdir()
    request = {
        "target": target,
        "kwargs": encode(kwargs, workdir / INPUTS, "kwargs"),
        "limits": {
            "cpu_s": int(limits.cpu_s),
            "memory_bytes": int(limits.memory_bytes),
            "file_bytes": int(limits.file_bytes),
        },
        "onboard_root": onboard_root,
    }
    (workdir / REQUEST).write_text(json.dumps(request))
    command = [sys.executable, "-P", "-B", "-m", "onboard.sandbox.worker", str(workdir)]
    if method == isolation.BUBBLEWRAP:
        command = isolation.bwrap_prefix(view) + command
    env = worker_env(workdir, threads)
    with open(workdir / LOG, "wb") as log:
        proc = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, cwd=workdir, start_new_session=True
        )
        timed_out = _wait(proc, limits.wall_s)
    return _outcome(workdir, proc.returncode, timed_out, limits, target)


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
    """torch's thread count in this process, if torch is loaded; otherwise the worker's torch picks the same
    default from the same inherited OMP_NUM_THREADS."""
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
    raise SandboxError(
        kind,
        f"{target} failed in the sandbox: {error}\n--- worker traceback (last lines) ---\n{remote}",
        _who_raised(remote),
        remote,
    )


def _who_raised(traceback_text: str) -> str:
    """Whose code the innermost frame belongs to, so the hint blames the right party (not always the repository)."""
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
