"""What the watch modules share: job keys, jobs, run outcomes, input validation, retry backoff, and the question
"already promoted?" (then neither the watcher nor the worker runs a revision again)."""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from onboard.errors import InputError

# Hub repo ids are `org/name`; names allow letters, digits, `-`, `_`, `.` (no `..`, no leading `.`/`-`).
_REPO_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}")
# A revision is what the hub reports as a commit sha; branch/tag names are accepted for manual enqueues.
_REVISION_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_./-]{0,199}")

JOB_STATES = ("queued", "running", "done", "failed")


class QueueError(InputError):
    """The queue database cannot be opened or used (path, permissions, corruption)."""


@dataclass(frozen=True, order=True)
class JobKey:
    """One unit of work: a model repo at one revision. The queue keeps at most one job per key."""

    repo: str
    revision: str

    @property
    def slug(self) -> str:
        return self.repo.replace("/", "__")


@dataclass(frozen=True)
class Job:
    """A row of the jobs table."""

    id: int
    repo: str
    revision: str
    state: str
    attempts: int
    source: str
    created_at: float
    updated_at: float
    next_attempt_at: float
    worker: str | None
    exit_code: int | None
    output_tail: str
    note: str

    @property
    def key(self) -> JobKey:
        return JobKey(self.repo, self.revision)


@dataclass(frozen=True)
class RunOutcome:
    """What running (or forwarding) one job produced. `retryable`: a transient failure worth another attempt."""

    exit_code: int | None
    output_tail: str
    retryable: bool
    note: str = ""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


@dataclass(frozen=True)
class Receipt:
    """What the queue did with one incoming event."""

    status: str
    """`enqueued` (a new job), `deduped` (its job already existed), `ignored` (stored, nothing to run: not a model,
    a deletion, another branch), `replay` (the same payload within the replay window: not stored again)."""
    event_id: int | None
    job_id: int | None
    key: JobKey | None
    reason: str = ""


def is_repo_id(value: str) -> bool:
    return bool(_REPO_RE.fullmatch(value)) and ".." not in value


def is_revision(value: str) -> bool:
    return bool(_REVISION_RE.fullmatch(value)) and ".." not in value


def job_key(repo: str, revision: str) -> JobKey:
    """Validate and build a JobKey; the values end up in a command line and a git branch name."""
    if not is_repo_id(repo):
        raise InputError(f"not a hub model id: {repo!r}", "use ORG/NAME, e.g. Qwen/Qwen3-8B")
    if not is_revision(revision):
        raise InputError(f"not a revision: {revision!r}", "use a commit sha (40 hex characters) or a branch name")
    return JobKey(repo, revision)


@dataclass(frozen=True)
class Backoff:
    """delay(n) = min(cap, base * factor**(n-1)) * (1 ± jitter), raised to the server's Retry-After when it set one."""

    base_s: float = 5.0
    factor: float = 2.0
    cap_s: float = 600.0
    jitter: float = 0.1
    """Spread retries of many jobs/watchers so they do not hit the hub in lockstep."""

    def delay(self, failures: int, retry_after: float | None = None) -> float:
        """Seconds to wait after the `failures`-th consecutive failure (1-based)."""
        raw = min(self.cap_s, self.base_s * self.factor ** max(0, failures - 1))
        raw *= 1.0 + random.uniform(-self.jitter, self.jitter)
        # The server's Retry-After is a floor, and it may exceed our cap: a rate limit is not ours to shorten.
        return max(raw, retry_after or 0.0)


PromotedCheck = Callable[[str, str], bool]


def never_promoted(repo: str, revision: str) -> bool:
    return False


def registry_check(registry_path: Path | str | None = None) -> PromotedCheck:
    """Ask the promotion registry at `registry_path` (else `$ONBOARD_REGISTRY`, else
    `./onboarding/registry.sqlite3`), which asking never creates."""
    from onboard.promote.registry import already_promoted

    return functools.partial(already_promoted, registry_path=registry_path)
