"""The queue's workers as a long-running service: build a Worker from the shared worker options, log, serve
until SIGINT/SIGTERM, and show jobs. Used by `onboard watch`, `onboard webhook serve` and `onboard queue work`.
"""

from __future__ import annotations

import logging
import sys
from typing import Any


def open_queue(db_path: str | None) -> Any:
    from onboard.watch.queue import Queue, default_db_path

    return Queue(db_path or default_db_path())


def build_worker(queue: Any, opts: dict[str, Any]) -> Any:
    """A Worker from the `worker_options` values (extra keys in `opts` are ignored)."""
    import os

    from onboard.errors import InputError
    from onboard.watch.types import Backoff, registry_check
    from onboard.watch.worker import DEFAULT_RUN_COMMAND, CommandExecutor, GitHubDispatch, Worker

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
        queue,
        executor,
        max_attempts=opts["max_attempts"],
        backoff=Backoff(base_s=base, cap_s=max(base, 900.0)),
        is_promoted=registry_check(registry),
    )


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
