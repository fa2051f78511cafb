"""Workers take jobs from the queue and run them: locally as a command, or forwarded to GitHub.

The command is a template, by default `onboard new-model {repo} --revision {revision} --json`; `{repo}`,
`{revision}` and `{slug}` are replaced inside each argument after shell-style splitting, and it runs without a shell,
so a repo name can never inject a command. A leading `onboard` runs this installation (`python -m onboard`).
Forwarding POSTs a `repository_dispatch` event (`{"event_type": ..., "client_payload": {"repo", "revision"}}`;
GitHub answers 204) whose workflow runs `onboard new-model` there; the token needs `contents: write` on that
repository (fine-grained: "Contents" read/write).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from onboard.errors import InputError
from onboard.retry_after import retry_after_seconds
from onboard.watch.queue import OUTPUT_TAIL_CHARS, Queue
from onboard.watch.types import Backoff, Job, PromotedCheck, RunOutcome, never_promoted

DEFAULT_RUN_COMMAND = "onboard new-model {repo} --revision {revision} --json"
# Exit codes that are a verdict, not a transient failure: `onboard` exits 1 when checks fail, and running the same
# revision again gives the same verdict.
FINAL_EXIT_CODES = frozenset({1})

DEFAULT_EVENT_TYPE = "hf-model-upload"
DEFAULT_API_URL = "https://api.github.com"
# 4xx other than these mean the request itself is wrong (token, repository name, payload): retrying cannot help.
_RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})
# Process groups of runs in progress, so a service shutting down can stop them (they run in their own session and
# would otherwise outlive it, and run again when their lease expires).
_RUNNING: set[int] = set()
_RUNNING_LOCK = threading.Lock()


def kill_running() -> int:
    """SIGKILL every run in progress in this process (service shutdown); returns how many. Their jobs are retried."""
    with _RUNNING_LOCK:
        pids = list(_RUNNING)
    for pid in pids:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return len(pids)


class Executor(Protocol):
    """Runs one job. Never raises for a failed run: the failure is the outcome."""

    timeout_s: float

    def run(self, job: Job) -> RunOutcome: ...


def parse_command(template: str) -> list[str]:
    """Split and check a run-command template (clear error for an unusable one)."""
    try:
        argv = shlex.split(template)
    except ValueError as exc:
        raise InputError(f"cannot parse the run command {template!r}: {exc}", "quote it as for a POSIX shell") from exc
    if not argv:
        raise InputError("the run command is empty", f"e.g. --run-command '{DEFAULT_RUN_COMMAND}'")
    if not any("{repo}" in a for a in argv):
        raise InputError(
            f"the run command {template!r} has no {{repo}} placeholder", f"e.g. --run-command '{DEFAULT_RUN_COMMAND}'"
        )
    return argv


@dataclass(frozen=True)
class CommandExecutor:
    """Run the command template for each job, in `cwd`, killing its process group after `timeout_s`."""

    template: str = DEFAULT_RUN_COMMAND
    timeout_s: float = 3600.0
    cwd: Path | None = None

    def __post_init__(self) -> None:
        parse_command(self.template)

    def argv(self, job: Job) -> list[str]:
        values = {"{repo}": job.repo, "{revision}": job.revision, "{slug}": job.key.slug}
        argv = []
        for arg in parse_command(self.template):
            for placeholder, value in values.items():
                arg = arg.replace(placeholder, value)
            argv.append(arg)
        if argv[0] == "onboard":
            argv[:1] = [sys.executable, "-m", "onboard"]
        return argv

    def run(self, job: Job) -> RunOutcome:
        env = dict(os.environ, ONBOARD_JOB_ID=str(job.id), ONBOARD_REPO=job.repo, ONBOARD_REVISION=job.revision)
        # Output goes to a file, not a pipe: a chatty run can neither block on a full pipe nor fill our memory.
        with tempfile.TemporaryFile() as out:
            try:
                proc = subprocess.Popen(
                    self.argv(job),
                    cwd=self.cwd,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except OSError as exc:
                return RunOutcome(None, "", retryable=False, note=f"cannot start the run command: {exc}")
            with _RUNNING_LOCK:
                _RUNNING.add(proc.pid)
            try:
                code: int | None = proc.wait(timeout=self.timeout_s)
                note = "" if code == 0 else f"exit {code}"
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)  # the whole group: new-model may have children
                proc.wait()
                code, note = None, f"timed out after {self.timeout_s:g} s"
            finally:
                with _RUNNING_LOCK:
                    _RUNNING.discard(proc.pid)
            out.seek(max(0, out.seek(0, os.SEEK_END) - OUTPUT_TAIL_CHARS * 4))
            tail = out.read().decode("utf-8", "replace")[-OUTPUT_TAIL_CHARS:]
        retryable = code != 0 and code not in FINAL_EXIT_CODES
        if code in FINAL_EXIT_CODES:
            note = f"exit {code}: a verdict, not retried"
        return RunOutcome(code, tail, retryable, note)


@dataclass(frozen=True)
class GitHubDispatch:
    repository: str
    """OWNER/REPO of the repository whose workflow handles the event."""
    token: str
    api_url: str = DEFAULT_API_URL
    event_type: str = DEFAULT_EVENT_TYPE
    timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[\w.-]+/[\w.-]+", self.repository):
            raise InputError(f"not a GitHub repository: {self.repository!r}", "use OWNER/REPO")
        if not self.token:
            raise InputError("no GitHub token for repository_dispatch", "set the variable named by --github-token-env")

    def run(self, job: Job) -> RunOutcome:
        body = {
            "event_type": self.event_type,
            "client_payload": {"repo": job.repo, "revision": job.revision, "job_id": job.id},
        }
        request = urllib.request.Request(
            f"{self.api_url.rstrip('/')}/repos/{self.repository}/dispatches",
            data=json.dumps(body).encode(),
            method="POST",
            headers={
                "Accept": "application/vnd.github+json",
                "Authorization": f"Bearer {self.token}",
                "X-GitHub-Api-Version": "2022-11-28",
                "Content-Type": "application/json",
                "User-Agent": "onboard-webhook",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return RunOutcome(0, f"HTTP {response.status}", retryable=False, note="dispatched to GitHub")
        except urllib.error.HTTPError as exc:
            detail = exc.read(2000).decode("utf-8", "replace")
            wait = retry_after_seconds(dict(exc.headers or {}))
            note = f"GitHub answered {exc.code}" + (f" (Retry-After {wait:g} s)" if wait is not None else "")
            return RunOutcome(exc.code, detail, retryable=exc.code in _RETRYABLE_STATUS, note=note)
        except (urllib.error.URLError, OSError) as exc:
            return RunOutcome(None, str(exc), retryable=True, note="GitHub unreachable")


@dataclass
class Worker:
    """Claims jobs one at a time and records their outcome; failures are retried with backoff up to max_attempts."""

    queue: Queue
    executor: Executor
    max_attempts: int = 3
    backoff: Backoff = field(default_factory=lambda: Backoff(base_s=30.0, cap_s=900.0))
    is_promoted: PromotedCheck = never_promoted
    name: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}")
    """Unique per worker: a result is recorded only by the worker that holds the job's lease."""

    def run_one(self) -> Job | None:
        """Run the next due job; returns it as recorded afterwards, or None when nothing is due."""
        # A run ends by timeout_s (killed, or the request given up); the lease's margin covers recording the result.
        job = self.queue.claim(self.name, self.executor.timeout_s + 60.0)
        if job is None:
            return None
        if self.is_promoted(job.repo, job.revision):
            outcome = RunOutcome(0, "", retryable=False, note="already promoted: not run again")
            self.queue.finish(job, self.name, outcome, state="done")
        else:
            outcome = self.executor.run(job)
            if outcome.ok:
                self.queue.finish(job, self.name, outcome, state="done")
            elif outcome.retryable and job.attempts < self.max_attempts:
                retry_at = time.time() + self.backoff.delay(job.attempts)
                note = f"{outcome.note}; retry {job.attempts + 1}/{self.max_attempts} scheduled".lstrip("; ")
                self.queue.finish(job, self.name, replace(outcome, note=note), state="queued", retry_at=retry_at)
            else:
                self.queue.finish(job, self.name, outcome, state="failed")
        return self.queue.job(job.id)

    def drain(self) -> list[Job]:
        """Run jobs until none is queued, waiting out retry delays. Returns the jobs it ran."""
        ran: list[Job] = []
        while True:
            job = self.run_one()
            if job is not None:
                ran.append(job)
                continue
            due = self.queue.next_due()
            if due is None:
                return ran
            time.sleep(min(max(0.0, due - time.time()), 1.0))

    def run_forever(self, stop: threading.Event, wake: threading.Event | None = None, idle_s: float = 2.0) -> None:
        """Serve the queue until `stop` is set; `wake` (set by a producer) cuts the idle wait short."""
        while not stop.is_set():
            if self.run_one() is not None:
                continue
            due = self.queue.next_due()
            wait = idle_s if due is None else min(idle_s, max(0.0, due - time.time()))
            if wake is not None:
                wake.wait(wait)
                wake.clear()
            else:
                stop.wait(wait)
