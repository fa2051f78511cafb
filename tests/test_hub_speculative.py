# ruff: noqa: F811  (pytest fixtures imported from tests.hubserver are used as parameters)
"""config.json and the index are asked for alongside the listing, and used only when they are the listed commit's;
every request carries the token, and a new token is used."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from onboard.inspect_checkpoint import hub
from onboard.inspect_checkpoint.source import open_source
from tests import malformed as M
from tests.hubserver import HubServer, fake_sha, hub_env, hub_server  # noqa: F401  (fixtures)

REPO = "org/tiny"
INDEX_PATH = f"/{REPO}/resolve/main/{hub.INDEX_FILE}"


def test_index_and_config_arrive_with_the_listing(hub_env: HubServer, tmp_path: Path) -> None:
    root = M.valid(tmp_path / "repo")
    hub_env.add_repo(REPO, root)
    hub_env.latency = 0.2
    with open_source(REPO) as src:
        assert src.index() == json.loads((root / hub.INDEX_FILE).read_text())
        assert src.read_json("config.json") == json.loads((root / "config.json").read_text())
    arrivals = {p: t for (_, p, _), t in zip(hub_env.stats.requests, hub_env.stats.times)}
    listed = arrivals[f"/api/models/{REPO}"]
    # Sent before the listing's answer came back (0.2 s per request): one round trip for listing + index, not two.
    assert arrivals[INDEX_PATH] - listed < 0.15
    assert arrivals[f"/{REPO}/resolve/main/config.json"] - listed < 0.15
    assert hub_env.stats.count("GET", hub.INDEX_FILE) == 1 and hub_env.stats.count("GET", "config.json") == 1


def test_a_branch_that_moves_under_the_listing_gives_the_listed_commits_files(
    hub_env: HubServer, tmp_path: Path
) -> None:
    old = M.valid(tmp_path / "old")
    new = M.valid(tmp_path / "new")
    index = json.loads((new / hub.INDEX_FILE).read_text())
    index["metadata"]["total_size"] = 1  # was 0: same size, other content (the commit tells them apart)
    (new / hub.INDEX_FILE).write_text(json.dumps(index))
    assert (new / hub.INDEX_FILE).stat().st_size == (old / hub.INDEX_FILE).stat().st_size
    hub_env.add_repo(REPO, old)

    def listing_after_a_push(handler, match: re.Match[str]) -> None:  # noqa: ANN001
        time.sleep(0.3)  # the speculative GETs have read `old` by now
        hub_env.add_repo(REPO, new, sha=fake_sha(REPO, "pushed"))  # main moves on to a new commit
        handler._model_info(REPO, "main", True)

    hub_env.add_route("GET", f"/api/models/{REPO}", listing_after_a_push)
    with open_source(REPO) as src:
        assert src.revision == fake_sha(REPO, "pushed")
        assert src.index() == json.loads((new / hub.INDEX_FILE).read_text())  # not old's index
        assert src.index()["metadata"]["total_size"] == 1  # type: ignore[index]
    # old's index (speculative, at main) and new's (at the listed sha): the stale one was dropped, not used.
    assert hub_env.stats.count("GET", hub.INDEX_FILE) == 2


def test_every_request_carries_the_token_and_a_new_token_is_used(
    hub_env: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub_env.add_repo(REPO, M.valid(tmp_path / "repo"))
    monkeypatch.setenv("HF_TOKEN", "hf_first")
    with open_source(REPO) as src:
        src.read_headers(src.safetensors_files())
    assert len(hub_env.stats.auth) == 5  # the listing, config.json, the index and the 2 shards
    assert set(hub_env.stats.auth) == {"Bearer hf_first"}
    hub_env.reset_stats()
    monkeypatch.setenv("HF_TOKEN", "hf_second")
    hub.list_repo(REPO, None)
    assert hub_env.stats.auth and set(hub_env.stats.auth) == {"Bearer hf_second"}
