"""`onboard queue list|retry|add|work`: inspect and drive the durable job queue of `watch` and `webhook serve`."""

from __future__ import annotations

import sys
from typing import Any

import click

from onboard.cli import emit_json, say
from onboard.cli.options import DB_OPTION, option, worker_options


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
@option("--state", type=click.Choice(["queued", "running", "done", "failed"]), help="Only jobs in this state.")
@option("--json", "as_json", is_flag=True, help="Print jobs (with output tails) as JSON on stdout.")
def list_command(db_path: str | None, state: str | None, as_json: bool) -> None:
    """List jobs, oldest first, with their attempts, exit code and note."""
    from onboard.watch.service import open_queue, render_jobs

    with open_queue(db_path) as queue:
        jobs = queue.jobs(state)
        if as_json:
            emit_json({"counts": queue.counts(), "jobs": jobs})
        else:
            say(render_jobs(jobs))


@queue_group.command("retry")
@DB_OPTION
@click.argument("job_ids", nargs=-1, type=int)
@option("--all-failed", is_flag=True, help="Retry every failed job.")
def retry_command(db_path: str | None, job_ids: tuple[int, ...], all_failed: bool) -> None:
    """Put failed jobs back in the queue with a fresh attempt budget."""
    from onboard.watch.service import open_queue

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
    from onboard.watch.service import open_queue
    from onboard.watch.types import job_key

    with open_queue(db_path) as queue:
        job_id, new = queue.enqueue(job_key(repo, revision), source="manual")
    say(f"job {job_id}: {repo}@{revision} " + ("enqueued" if new else "already queued"))


@queue_group.command("work")
@worker_options
@option("--once", is_flag=True, help="Run until the queue is empty (retries included), then exit.")
@option("--json", "as_json", is_flag=True, help="With --once: print the jobs run as JSON on stdout.")
def work_command(db_path: str | None, once: bool, as_json: bool, **opts: Any) -> None:
    """Run queued jobs. Exit 1 when --once ends with a job failed."""
    import threading

    from onboard.watch.service import build_worker, open_queue, render_jobs, serve_until_signalled, setup_logging

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
