"""Shared helpers for the watch tests: webhook payloads, real HTTP posts, the recording run command."""

from __future__ import annotations

import hashlib
import http.client
import json
import shlex
import sqlite3
import sys
from contextlib import closing
from pathlib import Path
from urllib.parse import urlsplit

RECORDER = Path(__file__).with_name("record_run.py")
SECRET = "s3cret-for-tests"


def event_digests(db: Path) -> set[str]:
    """The digest of every event stored in the queue file `db`."""
    with closing(sqlite3.connect(db)) as conn:
        return {row[0] for row in conn.execute("SELECT digest FROM events")}


def sha_for(repo: str, n: int = 0) -> str:
    return hashlib.sha1(f"{repo}#{n}".encode()).hexdigest()


def hf_payload(
    repo: str, sha: str, *, action: str = "update", scope: str = "repo.content", repo_type: str = "model",
    delivery: int = 0, refs: list[dict[str, object]] | None = None,
) -> dict[str, object]:  # fmt: skip
    """A payload shaped like the hub's (docs: huggingface.co/docs/hub/webhooks); `delivery` makes bodies distinct."""
    payload: dict[str, object] = {
        "event": {"action": action, "scope": scope},
        "repo": {"type": repo_type, "name": repo, "id": hashlib.md5(repo.encode()).hexdigest()[:24],
                 "private": False, "url": {"web": f"https://huggingface.co/{repo}"}, "headSha": sha,
                 "owner": {"id": "61d2000c3c2083e1c08af22d"}},
        "webhook": {"id": f"{delivery:024x}", "version": 3},
    }  # fmt: skip
    if scope == "repo.content":
        payload["updatedRefs"] = (
            refs if refs is not None else [{"ref": "refs/heads/main", "oldSha": None, "newSha": sha}]
        )
    return payload


def post(url: str, body: bytes | dict, secret: str | None = SECRET, headers: dict[str, str] | None = None,
         timeout: float = 10.0) -> tuple[int, dict]:  # fmt: skip
    """POST over a fresh connection; returns (status, JSON body)."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        hdrs = {"Content-Type": "application/json", **(headers or {})}
        if secret is not None:
            hdrs["X-Webhook-Secret"] = secret
        conn.request("POST", parts.path or "/webhook", body=data, headers=hdrs)
        response = conn.getresponse()
        raw = response.read()
        return response.status, json.loads(raw) if raw else {}
    finally:
        conn.close()


def recorder_command(log: Path) -> str:
    """A run-command template that records into `log` (the real queue → subprocess path, no mock)."""
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(RECORDER))} {shlex.quote(str(log))} {{repo}} {{revision}}"


def read_calls(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
