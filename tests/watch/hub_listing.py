"""The model-listing route `GET /api/models?author=…` for tests/hubserver.py, plugged in through `add_route`.

Answers like the hub: a JSON list of `{"_id", "id", "modelId"}` plus the fields asked for with `expand=` (or all
with `full=true`); `sha` is the repo's current `main`. `fail(n, status, retry_after)` makes the next n listing
requests answer `status` with a Retry-After header (429 is what the hub sends when a client polls too fast);
`omit_sha` drops the sha from listings (the client must then ask model_info).
"""

from __future__ import annotations

import hashlib
import re
import time
from urllib.parse import parse_qs, urlsplit

from tests.hubserver import HubServer


class ModelListing:
    def __init__(self, server: HubServer) -> None:
        self.server = server
        self.requests: list[tuple[float, int, dict[str, list[str]]]] = []
        """(time, status answered, query) of every listing request."""
        self.omit_sha = False
        self._failures: list[tuple[int, int]] = []
        server.add_route("GET", r"/api/models", self._handle)

    def fail(self, times: int, status: int = 429, retry_after: int = 1) -> None:
        self._failures.extend([(status, retry_after)] * times)

    def _handle(self, handler: object, match: re.Match[str]) -> None:
        query = parse_qs(urlsplit(handler.path).query)  # type: ignore[attr-defined]
        if self._failures:
            status, wait = self._failures.pop(0)
            self.requests.append((time.monotonic(), status, query))
            headers = {"Retry-After": str(wait)}
            handler.send_json({"error": f"injected {status}"}, status, headers)  # type: ignore[attr-defined]
            return
        self.requests.append((time.monotonic(), 200, query))
        author = query.get("author", [""])[0]
        expand = set(query.get("expand", [])) | set(query.get("expand[]", []))
        full = query.get("full", ["false"])[0].lower() == "true"
        out = []
        for repo_id, revisions in sorted(self.server.repos.items()):
            if not repo_id.startswith(author + "/") or "main" not in revisions:
                continue
            item: dict[str, object] = {"_id": hashlib.md5(repo_id.encode()).hexdigest()[:24], "id": repo_id,
                                       "modelId": repo_id}  # fmt: skip
            if (full or "sha" in expand) and not self.omit_sha:
                item["sha"] = revisions["main"].sha
            if full or "lastModified" in expand:
                item["lastModified"] = "2026-12-01T00:00:00.000Z"
            out.append(item)
        handler.send_json(out)  # type: ignore[attr-defined]
