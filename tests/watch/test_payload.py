"""Hugging Face webhook payloads → (repo, revision) or a reason to ignore them."""

from __future__ import annotations

import pytest

from onboard.watch.types import JobKey
from onboard.watch.webhook import PayloadError, parse_payload
from tests.watch.helpers import hf_payload

SHA, NEW = "c379e821c9c95d613899e8c4343e4bfee2b0c600", "575db8b7a51b6f85eb06eee540738584589f131c"


@pytest.mark.parametrize(
    ("payload", "key", "reason"),
    [
        (hf_payload("org/m", SHA, action="create", scope="repo"), JobKey("org/m", SHA), ""),
        (hf_payload("org/m", SHA, action="update", scope="repo"), JobKey("org/m", SHA), ""),
        (hf_payload("org/m", SHA), JobKey("org/m", SHA), ""),
        # updatedRefs wins over headSha for main
        (hf_payload("org/m", SHA, refs=[{"ref": "refs/heads/main", "oldSha": SHA, "newSha": NEW}]),
         JobKey("org/m", NEW), ""),
        # narrower unknown scope: an update of repo.content
        (hf_payload("org/m", SHA, scope="repo.content.lfs"), JobKey("org/m", SHA), ""),
        (hf_payload("org/m", SHA, refs=[{"ref": "refs/pr/3", "oldSha": None, "newSha": NEW}]), None, "only refs/heads/main"),
        (hf_payload("org/m", SHA, refs=[{"ref": "refs/heads/main", "oldSha": SHA, "newSha": None}]), None, "deleted"),
        (hf_payload("org/m", SHA, action="delete", scope="repo"), None, "nothing new"),
        (hf_payload("org/m", SHA, action="move", scope="repo"), None, "nothing new"),
        (hf_payload("org/m", SHA, action="update", scope="repo.config"), None, "does not change"),
        (hf_payload("org/m", SHA, action="create", scope="discussion"), None, "does not change"),
        (hf_payload("org/d", SHA, repo_type="dataset"), None, "not a model"),
        (hf_payload("../etc", SHA), None, "not a hub model id"),
        (hf_payload("org/m", "", action="create", scope="repo"), None, "headSha"),
        (hf_payload("org/m", "x" * 300, action="create", scope="repo"), None, "not a commit sha"),
        # A ref-like name is not a commit: the hub sends 40 hex digits (a branch name would only fail in the job).
        (hf_payload("org/m", SHA[:-1], action="create", scope="repo"), None, "not a commit sha (40 hex digits)"),
        (hf_payload("org/m", "main", refs=[{"ref": "refs/heads/main", "oldSha": None, "newSha": "main"}]), None,
         "not a commit sha"),
        (hf_payload("org/m", SHA.upper(), action="create", scope="repo"), None, "not a commit sha"),
    ],
)  # fmt: skip
def test_parse(payload: dict, key: JobKey | None, reason: str) -> None:
    parsed = parse_payload(payload)
    assert parsed.key == key
    assert reason in parsed.reason


@pytest.mark.parametrize(
    "payload",
    [[], {"repo": {}}, {"event": {"action": "update"}, "repo": {}}, {"event": {"action": "x", "scope": "repo"}}],
)
def test_not_a_webhook_payload(payload: object) -> None:
    with pytest.raises(PayloadError):
        parse_payload(payload)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b'{"event": {"action": "update"}, "repo": {}}', "`scope` - at `$.event`"),
        (b'{"event": {"action": "update", "scope": "repo"}, "repo": {"name": 5}}', "at `$.repo.name`"),
        (b'{"event": {"action": "update", "scope": "repo"}, "repo": {}, "updatedRefs": [{"ref": 1}]}',
         "at `$.updatedRefs[0].ref`"),
        (b"{\"event\": ", "not JSON"),
    ],
)  # fmt: skip
def test_a_wrong_shape_names_the_field(body: bytes, field: str) -> None:
    with pytest.raises(PayloadError, match="webhook body") as info:
        parse_payload(body)
    assert field in info.value.message
