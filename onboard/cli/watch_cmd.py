"""`onboard watch`: poll the hub for new models / revisions of some authors; run or enqueue `new-model` for each."""

from __future__ import annotations

import sys
from typing import Any

import click

from onboard.cli import emit_json, say
from onboard.cli.options import option, seconds, worker_options


@click.command("watch")
@option(
    "--author",
    "authors",
    multiple=True,
    required=True,
    envvar="ONBOARD_WATCH_AUTHORS",
    help="Hub user or organisation to watch (repeatable; the env var takes a space-separated list).",
)
@option("--interval", type=seconds(1), default=300.0, help="Seconds between polls.")
@option("--once", is_flag=True, help="Poll once, run (or forward) what is new, exit. For cron / CI schedules.")
@option("--baseline", is_flag=True, help="Record what exists now without enqueuing it (use on the first run).")
@option("--enqueue-only", is_flag=True, help="Only enqueue; another process (`onboard queue work`) runs jobs.")
@option("--endpoint", envvar="HF_ENDPOINT", help="Hub URL (default: $HF_ENDPOINT, else huggingface.co).")
@option("--json", "as_json", is_flag=True, help="With --once: print the poll report and jobs run as JSON.")
@worker_options
def watch_command(
    authors: tuple[str, ...],
    interval: float,
    once: bool,
    baseline: bool,
    enqueue_only: bool,
    endpoint: str | None,
    as_json: bool,
    db_path: str | None,
    **opts: Any,
) -> None:
    """Watch hub authors for new models and new revisions (sha changes).

    Each new (repo, revision) becomes one job in the durable queue (never twice, never when already promoted);
    jobs run `onboard new-model` here, or are forwarded to GitHub with --dispatch-github. Exit 1 when --once ends
    with a failed job, 2 when the hub cannot be polled.

    \b
    Examples:
      onboard watch --author Qwen --author deepseek-ai --once --baseline   # first run: remember, run nothing
      onboard watch --author Qwen --interval 600
      onboard watch --author Qwen --once --dispatch-github my-org/model-onboarding
    """
    import threading

    from onboard.watch.poller import Watcher, hub_api
    from onboard.watch.service import build_worker, open_queue, render_jobs, serve_until_signalled, setup_logging

    setup_logging()
    authors = tuple(a for value in authors for a in value.split())
    with open_queue(db_path) as queue:
        worker = build_worker(queue, opts)
        stop = threading.Event()
        watcher = Watcher(queue, authors, hub_api(endpoint), is_promoted=worker.is_promoted, stop=stop)
        if once:
            report = watcher.poll(baseline=baseline)
            ran = [] if enqueue_only else worker.drain()
            if as_json:
                emit_json({"poll": report, "jobs": ran})
            else:
                _say_changes(report)
                say(f"listed {report.listed} model(s); {len(report.enqueued)} new job(s)")
                if ran:
                    say(render_jobs(ran))
            sys.exit(1 if any(j.state == "failed" for j in ran) else 0)
        threads = [] if enqueue_only else [threading.Thread(target=worker.run_forever, args=(stop,), daemon=True)]
        threads.append(threading.Thread(target=_poll_loop, args=(watcher, interval, baseline), daemon=True))
        serve_until_signalled(stop, threads)


def _poll_loop(watcher: Any, interval: float, baseline: bool) -> None:
    while not watcher.stop.is_set():
        _say_changes(watcher.poll(baseline=baseline, give_up=False))
        baseline = False  # only the first pass is a baseline
        watcher.stop.wait(interval)


def _say_changes(report: Any) -> None:
    for change in report.changes:
        say(f"{change.kind:12} {change.repo}@{change.sha[:12]}: {change.outcome}")
