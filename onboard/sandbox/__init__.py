"""Run repository code (trust_remote_code) in an isolated worker; only data crosses back.

    from onboard.sandbox import run_isolated, Limits, SandboxError, SandboxUnavailable
    logits = run_isolated("onboard.sandbox.causal_lm:logits", kwargs={...}, checkpoint=Path(...))

Isolation (onboard/sandbox/isolation.py): bubblewrap, else SandboxUnavailable unless the user passed
--unsafe-no-sandbox. The worker: no network, read-only file system but its temp dir, fresh HOME
and HF cache, offline, CPU-time / memory / file-size / wall-time limits. Nothing here imports torch.
"""

from onboard.errors import SandboxError, SandboxUnavailable
from onboard.sandbox.code_hash import code_hash
from onboard.sandbox.run import Limits, UnsafeSandboxWarning, isolation_method, run_isolated

__all__ = [
    "Limits",
    "SandboxError",
    "SandboxUnavailable",
    "UnsafeSandboxWarning",
    "code_hash",
    "isolation_method",
    "run_isolated",
]
