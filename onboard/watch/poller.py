"""`onboard watch`: poll the hub for new models and new revisions of some authors and enqueue them.

Each poll lists the authors' models with their head sha and compares it with the last sha seen (the queue's
`watch_state`); a new repo or a changed sha becomes a job unless the registry already has that revision promoted.
huggingface_hub retries 429/5xx inside one call; a poll that still fails is retried after `Backoff.delay`.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from onboard.errors import HubError
from onboard.retry_after import retry_after_seconds
from onboard.watch.queue import Queue
from onboard.watch.types import Backoff, JobKey, PromotedCheck, is_repo_id, never_promoted

log = logging.getLogger("onboard.watch.poller")


@dataclass(frozen=True)
class Change:
    repo: str
    sha: str
    kind: str
    """`new-model`, `new-revision`, or `baseline` (recorded without a job)."""
    previous_sha: str | None
    outcome: str
    """`enqueued`, `deduped` (job already existed), `promoted` (already in the registry), `recorded` (baseline)."""
    job_id: int | None = None


@dataclass(frozen=True)
class PollReport:
    authors: tuple[str, ...]
    listed: int
    changes: tuple[Change, ...] = ()
    attempts: int = 1

    @property
    def enqueued(self) -> tuple[JobKey, ...]:
        return tuple(JobKey(c.repo, c.sha) for c in self.changes if c.outcome == "enqueued")


def hub_api(endpoint: str | None = None) -> Any:
    """An HfApi for `endpoint`, else $HF_ENDPOINT read now (huggingface_hub reads it only at import time)."""
    from huggingface_hub import HfApi

    return HfApi(endpoint=endpoint or os.environ.get("HF_ENDPOINT") or None)


def list_author_models(api: Any, author: str) -> list[tuple[str, str]]:
    """(repo id, head sha) of every model of `author`."""
    out = []
    for model in api.list_models(author=author, expand=["sha", "lastModified"]):
        sha = getattr(model, "sha", None) or api.model_info(model.id).sha
        if sha and is_repo_id(model.id):
            out.append((model.id, sha))
    return out


def poll_once(
    queue: Queue,
    authors: Iterable[str],
    api: Any,
    *,
    baseline: bool = False,
    is_promoted: PromotedCheck = never_promoted,
) -> PollReport:
    """One pass over all authors. `baseline`: remember what exists now without enqueuing it (first run)."""
    authors = tuple(authors)
    changes: list[Change] = []
    listed = 0
    for author in authors:
        models = list_author_models(api, author)
        listed += len(models)
        for repo, sha in models:
            previous = queue.seen_sha(repo)
            if previous == sha:
                continue
            kind = "new-model" if previous is None else "new-revision"
            if baseline:
                changes.append(Change(repo, sha, "baseline", previous, "recorded"))
            elif is_promoted(repo, sha):
                changes.append(Change(repo, sha, kind, previous, "promoted"))
            else:
                job_id, new = queue.enqueue(JobKey(repo, sha), source="watch")
                changes.append(Change(repo, sha, kind, previous, "enqueued" if new else "deduped", job_id))
            # Remember the sha only after its job is committed: a crash in between re-detects it (at least once).
            queue.set_seen(repo, sha)
    return PollReport(authors, listed, tuple(changes))


def _retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    return retry_after_seconds(getattr(response, "headers", None))


@dataclass
class Watcher:
    """Polls with backoff on failures. Waits go through `sleep` (default: `stop.wait`, so a stop cuts them short)."""

    queue: Queue
    authors: tuple[str, ...]
    api: Any
    backoff: Backoff = field(default_factory=lambda: Backoff(base_s=10.0, cap_s=900.0))
    max_attempts: int = 4
    """Consecutive failed polls before `poll` gives up (the long-running loop never gives up)."""
    is_promoted: PromotedCheck = never_promoted
    stop: threading.Event = field(default_factory=threading.Event)
    sleep: Callable[[float], object] | None = None

    def poll(self, *, baseline: bool = False, give_up: bool = True) -> PollReport:
        failures = 0
        while True:
            try:
                report = poll_once(self.queue, self.authors, self.api, baseline=baseline, is_promoted=self.is_promoted)
                return PollReport(report.authors, report.listed, report.changes, failures + 1)
            except Exception as exc:  # network, HTTP, hub errors: all are worth a later retry
                failures += 1
                wait = self.backoff.delay(failures, _retry_after(exc))
                if give_up and failures >= self.max_attempts:
                    raise HubError(
                        f"polling the hub failed {failures} times in a row: {type(exc).__name__}: {exc}",
                        "check HF_ENDPOINT / network / token; rate limits clear after the time the hub asked for",
                    ) from exc
                log.warning("poll failed (%s: %s); retrying in %.1f s", type(exc).__name__, exc, wait)
                (self.sleep or self.stop.wait)(wait)
                if self.stop.is_set():  # stopping: give up quietly, the next start polls again
                    return PollReport(self.authors, 0, (), failures)
