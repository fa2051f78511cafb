"""The worker options shared by `watch`, `webhook serve` and `queue work` (one definition, one meaning), and the
queue database option."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import click

from onboard.cli.params import seconds

DB_OPTION = click.option(
    "--db",
    "db_path",
    type=click.Path(dir_okay=False),
    envvar="ONBOARD_QUEUE_DB",
    help="Queue database (SQLite). Default: $ONBOARD_QUEUE_DB, else ~/.local/state/onboard/queue.sqlite.",
)


def worker_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """How jobs run: a local command (default) or a GitHub repository_dispatch; retries; dedupe registry."""
    options = [
        click.option(
            "--run-command",
            envvar="ONBOARD_RUN_COMMAND",
            show_envvar=True,
            help="Command run per job; {repo} {revision} {slug} are replaced. "
            "Default: onboard new-model {repo} --revision {revision} --json",
        ),
        click.option("--workdir", type=click.Path(file_okay=False), help="Working directory of the run command."),
        click.option(
            "--job-timeout",
            type=seconds(1),
            default=3600.0,
            show_default=True,
            help="Seconds before a run is killed (and retried).",
        ),
        click.option(
            "--max-attempts",
            type=click.IntRange(min=1),
            default=3,
            show_default=True,
            help="Runs per job before it is marked failed.",
        ),
        click.option(
            "--retry-delay",
            type=seconds(0),
            default=30.0,
            show_default=True,
            help="First retry delay in seconds (doubles each attempt, capped at 15 min).",
        ),
        click.option(
            "--dispatch-github",
            metavar="OWNER/REPO",
            envvar="ONBOARD_DISPATCH_REPO",
            help="Forward jobs as repository_dispatch events to this GitHub repository instead of running them here.",
        ),
        click.option(
            "--github-token-env",
            default="GITHUB_TOKEN",
            show_default=True,
            help="Environment variable holding the GitHub token (needs contents: write).",
        ),
        click.option(
            "--github-api-url",
            envvar="GITHUB_API_URL",
            default="https://api.github.com",
            show_default=True,
            help="GitHub API base URL (GitHub Enterprise: https://HOST/api/v3).",
        ),
        click.option(
            "--registry",
            "registry_path",
            type=click.Path(dir_okay=False),
            envvar="ONBOARD_REGISTRY",
            help="Promotion registry: promoted revisions are not run again.",
        ),
    ]
    return functools.reduce(lambda f, option: option(f), reversed(options), func)
