"""`onboard webhook serve`: receive Hugging Face webhooks, store them durably, run or forward one job per revision."""

from __future__ import annotations

import os
from typing import Any

import click

from onboard.cli import say
from onboard.cli.options import FiniteFloatRange, option, worker_options


@click.group("webhook")
def webhook_group() -> None:
    """Receive Hugging Face webhooks (see docs/webhook.md for deployment)."""


@webhook_group.command("serve")
@option("--host", default="127.0.0.1", help="Address to bind (0.0.0.0 behind a proxy).")
@option("--port", type=click.IntRange(0, 65535), default=8080, help="0 picks a free port.")
@option(
    "--secret-env", required=True, metavar="VAR", help="Variable holding the secret (compared with X-Webhook-Secret)."
)
@option("--max-body-bytes", type=click.IntRange(min=1024), default=1 << 20, help="Larger bodies get 413.")
@option(
    "--replay-window",
    type=FiniteFloatRange(min=0),
    default=86400.0,
    help="Seconds during which an identical payload is a replay (answered, not stored again).",
)
@option(
    "--workers",
    type=click.IntRange(min=0),
    default=1,
    help="Threads running jobs; 0 stores only (run `onboard queue work` elsewhere).",
)
@worker_options
def serve_command(
    host: str,
    port: int,
    secret_env: str,
    max_body_bytes: int,
    replay_window: float,
    workers: int,
    db_path: str | None,
    **opts: Any,
) -> None:
    """Serve POST /webhook until interrupted (SIGINT/SIGTERM stop it cleanly).

    Every accepted event is committed to the queue database before the 200 goes out; each (repo, revision)
    becomes exactly one job.

    \b
    Examples:
      WEBHOOK_SECRET=… onboard webhook serve --secret-env WEBHOOK_SECRET --port 8080
      onboard webhook serve --secret-env WEBHOOK_SECRET --dispatch-github my-org/model-onboarding
    """
    import threading

    from onboard.errors import InputError
    from onboard.watch.service import build_worker, open_queue, serve_until_signalled, setup_logging
    from onboard.watch.webhook import WebhookConfig, WebhookServer

    secret = os.environ.get(secret_env, "")
    if not secret:
        raise InputError(f"${secret_env} is empty or unset", f"export {secret_env}=<the secret set on the hub webhook>")
    setup_logging()
    with open_queue(db_path) as queue:
        worker = build_worker(queue, opts)
        config = WebhookConfig(
            secret.encode("latin-1", "replace"), max_body_bytes, replay_window, is_promoted=worker.is_promoted
        )
        server = WebhookServer(queue, config, host, port)
        stop = threading.Event()
        threads = [threading.Thread(target=server.serve_forever, name="webhook", daemon=True)]
        for i in range(workers):
            runner = build_worker(queue, opts) if i else worker
            threads.append(threading.Thread(target=runner.run_forever, args=(stop, server.wake), daemon=True))
        say(f"listening on {server.url}/webhook (queue: {queue.path})")
        # Stop order: stop accepting, then wake idle workers so they see `stop`. Request threads are daemons and are
        # not waited for: an event that got no answer is retried by its sender, and one already stored comes
        # back as a replay (tests/watch/test_webhook_lifecycle.py pins that stop() does not wait).
        stop_server = threading.Thread(target=lambda: (stop.wait(), server.stop(), server.wake.set()), daemon=True)
        serve_until_signalled(stop, [stop_server, *threads])
        say("stopped")
