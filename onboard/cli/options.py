"""Click parameter types and the options several commands share (one definition, one meaning)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click


class FiniteFloatRange(click.FloatRange):
    """click.FloatRange that also refuses nan and inf: `nan` passes every range comparison, so `--timeout nan`
    would otherwise run the whole command and fail, or hang, at the end."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


PATH = click.Path(path_type=Path)
FOLDER = click.Path(path_type=Path, file_okay=False)
FILE = click.Path(path_type=Path, dir_okay=False)

MAX_SECONDS = 7 * 86400.0  # a longer wait or timeout is a typo, and sleeps and socket timeouts overflow beyond


def seconds(low: float) -> FiniteFloatRange:
    """A duration option: finite, at least `low`, at most MAX_SECONDS."""
    return FiniteFloatRange(min=low, max=MAX_SECONDS)


option = functools.partial(click.option, show_default=True)
"""click.option with its default shown in --help (None and a flag's False never are)."""


def _stack(options: list[Callable[..., Any]]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """One decorator applying `options` in order (as `--help` lists them)."""
    return lambda func: functools.reduce(lambda f, option: option(f), reversed(options), func)


# --trust-remote-code / --unsafe-no-sandbox: on every command that may need the reference implementation.
remote_code_options = _stack(
    [
        option(
            "--trust-remote-code",
            is_flag=True,
            help="Allow the repository's own Python code (auto_map) where transformers has no implementation of the "
            "model or tokenizer. It runs only in a sandboxed worker (no network, read-only checkpoint, CPU/memory/time "
            "limits).",
        ),
        option(
            "--unsafe-no-sandbox",
            is_flag=True,
            help="With --trust-remote-code: run that code without the sandbox when isolation is unavailable (reported).",
        ),
    ]
)


def policy_from(trust_remote_code: bool, unsafe_no_sandbox: bool) -> Any:
    """The RemoteCodePolicy of the options; --unsafe-no-sandbox alone is a usage error (it would do nothing)."""
    from onboard.reference import RemoteCodePolicy

    if unsafe_no_sandbox and not trust_remote_code:
        raise click.UsageError("--unsafe-no-sandbox only applies with --trust-remote-code")
    return RemoteCodePolicy(trust_remote_code, unsafe_no_sandbox)


REVISION_OPTION = option("--revision", help="Branch, tag or commit of a hub repo (default: main).")
MAX_LONG_TOKENS_OPTION = option(
    "--max-long-tokens",
    type=click.IntRange(16),
    help="Cap on the goldens' long prompt (default 4096). It is sized to cross the model's sliding window, "
    "attention chunk and original rope context; raise it when validate says a boundary was not crossed.",
)
SERVED_DTYPE_OPTION = option(
    "--dtype",
    type=click.Choice(["bfloat16", "float16", "float32"]),
    default="bfloat16",
    help="Dtype the models run in (as served).",
)
WORKSPACE_OPTION = option(
    "--workspace",
    type=click.Path(file_okay=False),
    default=".",
    help="Folder holding onboarding/<slug>/<revision>/ (and checklists/, golden_outputs/).",
)
REGISTRY_OPTION = option(
    "--registry",
    type=click.Path(dir_okay=False),
    help="Registry database (default: $ONBOARD_REGISTRY, else <workspace>/onboarding/registry.sqlite3).",
)
DB_OPTION = option(
    "--db",
    "db_path",
    type=click.Path(dir_okay=False),
    envvar="ONBOARD_QUEUE_DB",
    help="Queue database (SQLite). Default: $ONBOARD_QUEUE_DB, else ~/.local/state/onboard/queue.sqlite.",
)

# The queue of `watch`, `webhook serve` and `queue work`, and how they run jobs: a local command (default) or a GitHub
# repository_dispatch.
worker_options = _stack(
    [
        DB_OPTION,
        option(
            "--run-command",
            envvar="ONBOARD_RUN_COMMAND",
            show_envvar=True,
            help="Command run per job; {repo} {revision} {slug} are replaced. "
            "Default: onboard new-model {repo} --revision {revision} --json",
        ),
        option("--workdir", type=click.Path(file_okay=False), help="Working directory of the run command."),
        option("--job-timeout", type=seconds(1), default=3600.0, help="Seconds before a run is killed (and retried)."),
        option(
            "--max-attempts", type=click.IntRange(min=1), default=3, help="Runs per job before it is marked failed."
        ),
        option(
            "--retry-delay", type=seconds(0), default=30.0, help="Seconds to the first retry (doubles, up to 15 min)."
        ),
        option(
            "--dispatch-github",
            metavar="OWNER/REPO",
            envvar="ONBOARD_DISPATCH_REPO",
            help="Forward jobs as repository_dispatch events to this GitHub repository instead of running them here.",
        ),
        option(
            "--github-token-env", default="GITHUB_TOKEN", help="Variable holding the GitHub token (contents: write)."
        ),
        option(
            "--github-api-url",
            envvar="GITHUB_API_URL",
            default="https://api.github.com",
            help="GitHub API base URL (GitHub Enterprise: https://HOST/api/v3).",
        ),
        option(
            "--registry",
            "registry_path",
            type=click.Path(dir_okay=False),
            envvar="ONBOARD_REGISTRY",
            help="Promotion registry: promoted revisions are not run again.",
        ),
    ]
)
