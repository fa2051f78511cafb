"""`--trust-remote-code` / `--unsafe-no-sandbox`: the same two options on every command that may need a reference."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

TRUST_HELP = (
    "Allow the repository's own Python code (auto_map) where transformers has no implementation of the model or "
    "tokenizer. It runs only in a sandboxed worker (no network, read-only checkpoint, CPU/memory/time limits)."
)
UNSAFE_HELP = "With --trust-remote-code: run that code without the sandbox when isolation is unavailable (reported)."


def remote_code_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add both options; the command receives `trust_remote_code` and `unsafe_no_sandbox`."""
    command = click.option("--unsafe-no-sandbox", is_flag=True, help=UNSAFE_HELP)(command)
    return click.option("--trust-remote-code", is_flag=True, help=TRUST_HELP)(command)


def policy_from(trust_remote_code: bool, unsafe_no_sandbox: bool) -> Any:
    """The RemoteCodePolicy of the options; --unsafe-no-sandbox alone is a usage error (it would do nothing)."""
    from onboard.reference import RemoteCodePolicy

    if unsafe_no_sandbox and not trust_remote_code:
        raise click.UsageError("--unsafe-no-sandbox only applies with --trust-remote-code")
    return RemoteCodePolicy(trust_remote_code, unsafe_no_sandbox)
