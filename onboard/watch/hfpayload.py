"""Hugging Face webhook payloads → the (repo, revision) to onboard, or why there is nothing to do.

Format (https://huggingface.co/docs/hub/webhooks): `event.action` + `event.scope`; `repo.type`, `repo.name`,
`repo.headSha` (the latest commit on `main`, sent for `repo*` scopes); on content changes `updatedRefs`, a list of
`{ref, oldSha, newSha}` (`oldSha` null for a new ref, `newSha` null for a deleted one). Unknown narrower scopes
(e.g. `repo.config.dois`) are treated as updates of their broader scope, as the docs advise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from onboard.errors import InputError
from onboard.watch.types import JobKey, is_repo_id, is_revision

MAIN_REF = "refs/heads/main"

# scope → actions that can change what `new-model` would see. Everything else is stored and ignored.
RELEVANT: dict[str, frozenset[str]] = {
    "repo": frozenset({"create", "update"}),  # delete/move: nothing new to onboard
    "repo.content": frozenset({"update"}),  # new commits, tags, branches
}
# Narrower scopes fold into these broader ones before the lookup.
BROADER_SCOPES = ("repo.content", "repo.config", "repo", "discussion.comment", "discussion")


class PayloadError(InputError):
    """The body is JSON but not a Hugging Face webhook payload."""


@dataclass(frozen=True)
class ParsedEvent:
    action: str
    scope: str
    repo_type: str | None
    repo_name: str | None
    key: JobKey | None
    """The job to run; None when the event is ignored (see `reason`)."""
    reason: str = ""


def _broad_scope(scope: str) -> str:
    for broad in BROADER_SCOPES:
        if scope == broad or scope.startswith(broad + "."):
            return broad
    return scope


def _main_sha(payload: dict[str, Any], repo: dict[str, Any]) -> tuple[str | None, str]:
    """The new sha of `main` and, when there is none, why."""
    refs = payload.get("updatedRefs")
    if isinstance(refs, list) and refs:
        for ref in refs:
            if isinstance(ref, dict) and ref.get("ref") == MAIN_REF:
                sha = ref.get("newSha")
                return (sha, "") if isinstance(sha, str) and sha else (None, "main was deleted")
        names = ", ".join(str(r.get("ref")) for r in refs if isinstance(r, dict))
        return None, f"only {MAIN_REF} is onboarded (updated: {names})"
    sha = repo.get("headSha")
    if isinstance(sha, str) and sha:
        return sha, ""
    return None, "no repo.headSha (an empty repo has nothing to onboard yet)"


def parse_payload(payload: Any) -> ParsedEvent:
    """Decide what one webhook payload asks for. Raises PayloadError when it is not a webhook payload at all."""
    if not isinstance(payload, dict):
        raise PayloadError("webhook body is not a JSON object", "send the Hugging Face webhook payload unchanged")
    event, repo = payload.get("event"), payload.get("repo")
    if (
        not isinstance(event, dict)
        or not isinstance(event.get("action"), str)
        or not isinstance(event.get("scope"), str)
    ):
        raise PayloadError("webhook payload has no event.action / event.scope", "is this a Hugging Face webhook?")
    if not isinstance(repo, dict):
        raise PayloadError("webhook payload has no repo object", "is this a Hugging Face webhook?")
    action, scope = event["action"], event["scope"]
    repo_type = repo.get("type") if isinstance(repo.get("type"), str) else None
    name = repo.get("name") if isinstance(repo.get("name"), str) else None

    def ignored(reason: str) -> ParsedEvent:
        return ParsedEvent(action, scope, repo_type, name, None, reason)

    broad = _broad_scope(scope)
    if broad == "repo.config" or broad not in RELEVANT:
        return ignored(f"scope {scope!r} does not change the model files")
    if action not in RELEVANT[broad] and scope == broad:
        return ignored(f"action {action!r} on {scope!r} leaves nothing new to onboard")
    if repo_type != "model":
        return ignored(f"repo type {repo_type!r} is not a model")
    if name is None or not is_repo_id(name):
        return ignored(f"repo.name {name!r} is not a hub model id")
    sha, why = _main_sha(payload, repo)
    if sha is None:
        return ignored(why)
    if not is_revision(sha):
        return ignored(f"revision {sha!r} is not a commit sha")
    return ParsedEvent(action, scope, repo_type, name, JobKey(name, sha))
