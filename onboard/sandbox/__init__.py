"""Run repository code (trust_remote_code) in an isolated worker; only data crosses back.

    logits = run_isolated("onboard.sandbox.probes:logits", kwargs={...}, checkpoint=Path(...))

Isolation is bubblewrap (isolation.py), else SandboxUnavailable unless the user passed --unsafe-no-sandbox. Nothing
here imports torch.
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
