"""Forward a job to GitHub as a `repository_dispatch` event: the workflow then runs `onboard new-model` there.

POST {api}/repos/{owner}/{repo}/dispatches with `{"event_type": ..., "client_payload": {"repo", "revision"}}`;
GitHub answers 204. The token needs `contents: write` on that repository (fine-grained: "Contents" read/write).
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from dataclasses import dataclass

from onboard.errors import InputError
from onboard.retry_after import retry_after_seconds
from onboard.watch.types import Job, RunOutcome

DEFAULT_EVENT_TYPE = "hf-model-upload"
DEFAULT_API_URL = "https://api.github.com"
# 4xx other than these mean the request itself is wrong (token, repository name, payload): retrying cannot help.
_RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})


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

    @property
    def lease_s(self) -> float:
        return self.timeout_s + 60.0

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
