"""Hugging Face webhook payloads → the (repo, revision) to onboard, or why there is nothing to do.

Format (https://huggingface.co/docs/hub/webhooks): `event.action` + `event.scope`; `repo.type`, `repo.name`,
`repo.headSha` (the latest commit on `main`, sent for `repo*` scopes); on content changes `updatedRefs`, a list of
`{ref, oldSha, newSha}` (`oldSha` null for a new ref, `newSha` null for a deleted one). Unknown narrower scopes
(e.g. `repo.config.dois`) are treated as updates of their broader scope, as the docs advise. The body is decoded
by msgspec into the structs below: a payload of the wrong shape is a PayloadError naming the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from onboard import serde
from onboard.checkpoint_id import is_commit_sha
from onboard.errors import InputError
from onboard.watch.types import JobKey, is_repo_id

MAIN_REF = "refs/heads/main"

# scope → actions that can change what `new-model` would see. Everything else is stored and ignored.
RELEVANT: dict[str, frozenset[str]] = {
    "repo": frozenset({"create", "update"}),  # delete/move: nothing new to onboard
    "repo.content": frozenset({"update"}),  # new commits, tags, branches
}
# Narrower scopes fold into these broader ones before the lookup.
BROADER_SCOPES = ("repo.content", "repo.config", "repo", "discussion.comment", "discussion")


class PayloadError(InputError):
    """The body is not a Hugging Face webhook payload."""


class _Event(msgspec.Struct):
    action: str
    scope: str


class _Repo(msgspec.Struct):
    type: str | None = None
    name: str | None = None
    headSha: str | None = None  # noqa: N815 (the payload's spelling)


class _Ref(msgspec.Struct):
    ref: str
    newSha: str | None = None  # noqa: N815
    oldSha: str | None = None  # noqa: N815


class _Payload(msgspec.Struct):
    event: _Event
    repo: _Repo
    updatedRefs: list[_Ref] = []  # noqa: N815


_HINT = "send the Hugging Face webhook payload unchanged (is this a Hugging Face webhook?)"


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


def _main_sha(payload: _Payload) -> tuple[str | None, str]:
    """The new sha of `main` and, when there is none, why."""
    if payload.updatedRefs:
        for ref in payload.updatedRefs:
            if ref.ref == MAIN_REF:
                return (ref.newSha, "") if ref.newSha else (None, "main was deleted")
        names = ", ".join(r.ref for r in payload.updatedRefs)
        return None, f"only {MAIN_REF} is onboarded (updated: {names})"
    if payload.repo.headSha:
        return payload.repo.headSha, ""
    return None, "no repo.headSha (an empty repo has nothing to onboard yet)"


def parse_payload(payload: bytes | Any) -> ParsedEvent:
    """Decide what one webhook payload (the raw body, or already-parsed JSON) asks for. Raises PayloadError naming
    the field when it is not a webhook payload at all."""
    if isinstance(payload, (bytes, str)):
        parsed: _Payload = serde.decode_json(payload, _Payload, "webhook body", _HINT, PayloadError)
    else:
        parsed = serde.convert(payload, _Payload, "webhook payload", _HINT, PayloadError)
    action, scope = parsed.event.action, parsed.event.scope
    repo_type, name = parsed.repo.type, parsed.repo.name

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
    sha, why = _main_sha(parsed)
    if sha is None:
        return ignored(why)
    if not is_commit_sha(sha):  # the hub sends full shas; anything else would only fail later, in the job
        return ignored(f"revision {sha!r} is not a commit sha (40 hex digits)")
    return ParsedEvent(action, scope, repo_type, name, JobKey(name, sha))
