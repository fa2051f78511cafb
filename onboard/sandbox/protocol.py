"""The contract between run_isolated (parent) and the worker: file names, allowed targets, the in-worker marker.

Kept apart from worker.py so the parent never imports the worker module (`python -m` must find it unloaded).
"""

from __future__ import annotations

import os
import re

REQUEST, RESULT, LOG = "request.json", "result.json", "worker.log"
INPUTS, OUTPUTS = "inputs.safetensors", "outputs.safetensors"
IN_WORKER_ENV = "ONBOARD_SANDBOX_WORKER"
_TARGET = re.compile(r"^onboard(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$")


class TargetRefused(Exception):
    """The requested target is not a function of the onboard package."""


def check_target(target: str) -> tuple[str, str]:
    """(module, function) of an allowed target `onboard.pkg.module:function`; TargetRefused otherwise."""
    if not isinstance(target, str) or not _TARGET.match(target):
        raise TargetRefused(
            f"refused target {target!r}: only functions of the onboard package "
            "('onboard.module:function') run in the sandbox"
        )
    module, function = target.split(":")
    return module, function


def in_worker() -> bool:
    """True inside a sandbox worker. Worker-only functions (they pass trust_remote_code=True) check it."""
    return os.environ.get(IN_WORKER_ENV) == "1"


def require_worker(what: str) -> None:
    """Refuse to run `what` outside the sandbox worker: it executes repository code."""
    if not in_worker():
        raise RuntimeError(f"{what} runs repository code: call it through onboard.sandbox.run_isolated only")
