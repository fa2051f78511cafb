"""`onboard queue list|retry|add|work`: inspect and drive the durable job queue of `watch` and `webhook serve`.

Also home of the worker options shared by `watch`, `webhook serve` and `queue work` (one definition, one meaning).
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from typing import Any

import click

DB_OPTION = click.option(
    "--db", "db_path", type=click.Path(dir_okay=False), envvar="ONBOARD_QUEUE_DB",
    help="Queue database (SQLite). Default: $ONBOARD_QUEUE_DB, else ~/.local/state/onboard/queue.sqlite.",
)  # fmt: skip


def worker_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """How jobs run: a local command (default) or a GitHub repository_dispatch; retries; dedupe registry."""
    options = [
        click.option("--run-command", envvar="ONBOARD_RUN_COMMAND", show_envvar=True,
                     help="Command run per job; {repo} {revision} {slug} are replaced. "
                          "Default: onboard new-model {repo} --revision {revision} --json"),
        click.option("--workdir", type=click.Path(file_okay=False), help="Working directory of the run command."),
        click.option("--job-timeout", type=click.FloatRange(min=1), default=3600.0, show_default=True,
                     help="Seconds before a run is killed (and retried)."),
        click.option("--max-attempts", type=click.IntRange(min=1), default=3, show_default=True,
                     help="Runs per job before it is marked failed."),
        click.option("--retry-delay", type=click.FloatRange(min=0), default=30.0, show_default=True,
                     help="First retry delay in seconds (doubles each attempt, capped at 15 min)."),
        click.option("--dispatch-github", metavar="OWNER/REPO", envvar="ONBOARD_DISPATCH_REPO",
                     help="Forward jobs as repository_dispatch events to this GitHub repository instead of running "
                          "them here."),
        click.option("--github-token-env", default="GITHUB_TOKEN", show_default=True,
                     help="Environment variable holding the GitHub token (needs contents: write)."),
        click.option("--github-api-url", envvar="GITHUB_API_URL", default="https://api.github.com",
                     show_default=True, help="GitHub API base URL (GitHub Enterprise: https://HOST/api/v3)."),
        click.option("--registry", "registry_path", type=click.Path(dir_okay=False), envvar="ONBOARD_REGISTRY",
                     help="Promotion registry: promoted revisions are not run again."),
    ]  # fmt: skip
    return functools.reduce(lambda f, option: option(f), reversed(options), func)


def open_queue(db_path: str | None) -> Any:
    from onboard.watch.queue import Queue, default_db_path

    return Queue(db_path or default_db_path())


def build_worker(queue: Any, opts: dict[str, Any]) -> Any:
    """A Worker from the `worker_options` values (extra keys in `opts` are ignored)."""
    import os

    from onboard.errors import InputError
    from onboard.watch.backoff import Backoff
    from onboard.watch.dedupe import registry_check
    from onboard.watch.dispatch import GitHubDispatch
    from onboard.watch.worker import DEFAULT_RUN_COMMAND, CommandExecutor, Worker

    executor: Any
    if opts["dispatch_github"]:
        token_env = opts["github_token_env"]
        token = os.environ.get(token_env, "")
        if not token:
            raise InputError(f"${token_env} is empty: no token for repository_dispatch", f"export {token_env}=…")
        executor = GitHubDispatch(opts["dispatch_github"], token, api_url=opts["github_api_url"])
    else:
        executor = CommandExecutor(
            opts["run_command"] or DEFAULT_RUN_COMMAND, timeout_s=opts["job_timeout"], cwd=opts["workdir"]
        )
    base = opts["retry_delay"]
    registry = opts["registry_path"]
    if registry is None and opts["workdir"] and not os.environ.get("ONBOARD_REGISTRY"):
        # new-model runs in --workdir, so its promotions land in that workspace's registry
        registry = os.path.join(opts["workdir"], "onboarding", "registry.sqlite3")
    return Worker(
        queue, executor, max_attempts=opts["max_attempts"],
        backoff=Backoff(base_s=base, cap_s=max(base, 900.0)), is_promoted=registry_check(registry),
    )  # fmt: skip


def serve_until_signalled(stop: Any, threads: list[Any]) -> None:
    """Start `threads`, wait for SIGINT/SIGTERM (which set `stop`), then stop runs in progress and join."""
    import signal

    from onboard.watch.worker import kill_running

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    for thread in threads:
        thread.start()
    stop.wait()
    if killed := kill_running():
        logging.getLogger("onboard.watch").warning("stopped %d run(s) in progress; their jobs will be retried", killed)
    for thread in threads:
        thread.join(timeout=15)


def setup_logging() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("onboard.watch")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)


def render_jobs(jobs: list[Any]) -> str:
    if not jobs:
        return "no jobs"
    lines = [f"{'ID':>5}  {'STATE':8} {'TRIES':>5}  {'EXIT':>4}  {'REPO':40} {'REVISION':12}  NOTE"]
    for j in jobs:
        code = "" if j.exit_code is None else str(j.exit_code)
        lines.append(f"{j.id:>5}  {j.state:8} {j.attempts:>5}  {code:>4}  {j.repo:40} {j.revision[:12]:12}  {j.note}")
    return "\n".join(lines)


@click.group("queue")
def queue_group() -> None:
    """The durable job queue of `onboard watch` and `onboard webhook serve`.

    \b
    Examples:
      onboard queue list --state failed
      onboard queue retry 12 13
      onboard queue work --once
    """


@queue_group.command("list")
@DB_OPTION
@click.option("--state", type=click.Choice(["queued", "running", "done", "failed"]), help="Only jobs in this state.")
@click.option("--json", "as_json", is_flag=True, help="Print jobs (with output tails) as JSON on stdout.")
def list_command(db_path: str | None, state: str | None, as_json: bool) -> None:
    """List jobs, oldest first, with their attempts, exit code and note."""
    from onboard.cli.output import emit_json, say

    with open_queue(db_path) as queue:
        jobs = queue.jobs(state)
        if as_json:
            emit_json({"counts": queue.counts(), "jobs": jobs})
        else:
            say(render_jobs(jobs))


@queue_group.command("retry")
@DB_OPTION
@click.argument("job_ids", nargs=-1, type=int)
@click.option("--all-failed", is_flag=True, help="Retry every failed job.")
def retry_command(db_path: str | None, job_ids: tuple[int, ...], all_failed: bool) -> None:
    """Put failed jobs back in the queue with a fresh attempt budget."""
    from onboard.cli.output import say

    if bool(job_ids) == all_failed:
        raise click.UsageError("give JOB_IDS or --all-failed (not both)")
    with open_queue(db_path) as queue:
        ids = queue.retry(None if all_failed else list(job_ids))
    say(f"requeued {len(ids)} job(s): {' '.join(map(str, ids))}".rstrip(": "))


@queue_group.command("add")
@DB_OPTION
@click.argument("repo")
@click.argument("revision")
def add_command(db_path: str | None, repo: str, revision: str) -> None:
    """Enqueue REPO at REVISION by hand (no-op when that job exists)."""
    from onboard.cli.output import say
    from onboard.watch.types import job_key

    with open_queue(db_path) as queue:
        job_id, new = queue.enqueue(job_key(repo, revision), source="manual")
    say(f"job {job_id}: {repo}@{revision} " + ("enqueued" if new else "already queued"))


@queue_group.command("work")
@DB_OPTION
@worker_options
@click.option("--once", is_flag=True, help="Run until the queue is empty (retries included), then exit.")
@click.option("--json", "as_json", is_flag=True, help="With --once: print the jobs run as JSON on stdout.")
def work_command(db_path: str | None, once: bool, as_json: bool, **opts: Any) -> None:
    """Run queued jobs. Exit 1 when --once ends with a job failed."""
    import threading

    from onboard.cli.output import emit_json, say

    setup_logging()
    with open_queue(db_path) as queue:
        worker = build_worker(queue, opts)
        if once:
            ran = worker.drain()
            if as_json:
                emit_json(ran)
            else:
                say(render_jobs(ran))
            sys.exit(1 if any(j.state == "failed" for j in ran) else 0)
        stop = threading.Event()
        serve_until_signalled(stop, [threading.Thread(target=worker.run_forever, args=(stop,), daemon=True)])
