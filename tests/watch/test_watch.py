"""`onboard watch` against a loopback hub: new model → job, unchanged → none, new sha → job; backoff on 429."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from huggingface_hub import HfApi

from onboard.errors import HubError
from onboard.watch.poller import Watcher, poll_once
from onboard.watch.queue import Queue
from onboard.watch.types import Backoff
from tests.hubserver import HubServer
from tests.watch.helpers import read_calls, recorder_command, sha_for
from tests.watch.hub_listing import ModelListing

Hub = tuple[HubServer, ModelListing]


def test_new_model_unchanged_new_sha(listing_hub: Hub, queue_db: Path, tmp_path: Path) -> None:
    hub, listing = listing_hub
    api = HfApi(endpoint=hub.url)
    hub.add_repo("acme/alpha", tmp_path, sha=sha_for("alpha", 1))
    hub.add_repo("other/beta", tmp_path, sha=sha_for("beta", 1))  # not a watched author
    with Queue(queue_db) as q:
        first = poll_once(q, ["acme"], api)
        assert [(c.repo, c.kind, c.outcome) for c in first.changes] == [("acme/alpha", "new-model", "enqueued")]
        assert poll_once(q, ["acme"], api).changes == ()  # unchanged → nothing
        hub.add_repo("acme/alpha", tmp_path, sha=sha_for("alpha", 2))  # a new commit on main
        hub.add_repo("acme/gamma", tmp_path, sha=sha_for("gamma", 1))
        third = poll_once(q, ["acme"], api)
        assert {(c.repo, c.kind, c.previous_sha) for c in third.changes} == {
            ("acme/alpha", "new-revision", sha_for("alpha", 1)),
            ("acme/gamma", "new-model", None),
        }
        assert [(j.repo, j.revision) for j in q.jobs()] == [
            ("acme/alpha", sha_for("alpha", 1)), ("acme/alpha", sha_for("alpha", 2)), ("acme/gamma", sha_for("gamma", 1)),
        ]  # fmt: skip
    assert listing.requests[0][2]["author"] == ["acme"]


def test_baseline_then_promoted_dedupe_and_sha_fallback(listing_hub: Hub, queue_db: Path, tmp_path: Path) -> None:
    hub, listing = listing_hub
    api = HfApi(endpoint=hub.url)
    hub.add_repo("acme/old", tmp_path, sha=sha_for("old"))
    listing.omit_sha = True  # the client must fall back on model_info for the sha
    with Queue(queue_db) as q:
        base = poll_once(q, ["acme"], api, baseline=True)
        assert [(c.repo, c.sha, c.outcome) for c in base.changes] == [("acme/old", sha_for("old"), "recorded")]
        assert q.jobs() == []
        hub.add_repo("acme/new", tmp_path, sha=sha_for("new"))
        hub.add_repo("acme/done", tmp_path, sha=sha_for("done"))
        report = poll_once(q, ["acme"], api, is_promoted=lambda repo, sha: repo == "acme/done")
        assert {(c.repo, c.outcome) for c in report.changes} == {("acme/new", "enqueued"), ("acme/done", "promoted")}
        assert [j.repo for j in q.jobs()] == ["acme/new"]
    assert hub.stats.count("GET", "/api/models/acme/new") >= 1


def test_429_with_retry_after_is_waited_out(listing_hub: Hub, queue_db: Path, tmp_path: Path) -> None:
    hub, listing = listing_hub
    hub.add_repo("acme/alpha", tmp_path, sha=sha_for("alpha"))
    listing.fail(1, 429, retry_after=1)
    with Queue(queue_db) as q:
        report = Watcher(q, ("acme",), HfApi(endpoint=hub.url)).poll()
    assert [c.repo for c in report.changes] == ["acme/alpha"]
    (t429, s429, _), (t_ok, s_ok, _) = listing.requests
    assert (s429, s_ok) == (429, 200)
    assert t_ok - t429 >= 1.0  # the client waited at least Retry-After before asking again


def test_watcher_backs_off_on_errors_and_gives_up(listing_hub: Hub, queue_db: Path, tmp_path: Path) -> None:
    hub, listing = listing_hub
    hub.add_repo("acme/alpha", tmp_path, sha=sha_for("alpha"))
    # 403 is not retried inside huggingface_hub: our own backoff handles it, honouring Retry-After as a floor.
    listing.fail(2, 403, retry_after=7)
    waits: list[float] = []
    backoff = Backoff(base_s=2.0, factor=2.0, jitter=0.0)
    with Queue(queue_db) as q:
        watcher = Watcher(q, ("acme",), HfApi(endpoint=hub.url), backoff=backoff, sleep=waits.append)
        assert watcher.poll().attempts == 3
        assert waits == [7.0, 7.0]
        listing.fail(10, 403, retry_after=0)
        waits.clear()
        with pytest.raises(HubError, match="failed 4 times"):
            watcher.poll()
        assert waits == [2.0, 4.0, 8.0]


def test_backoff_policy() -> None:
    b = Backoff(base_s=5, factor=2, cap_s=60, jitter=0.0)
    assert [b.delay(n) for n in (1, 2, 3, 4, 5, 6)] == [5, 10, 20, 40, 60, 60]
    assert b.delay(1, retry_after=120) == 120  # the server's wait wins, even over the cap


def _watch_cli(hub: HubServer, db: Path, log: Path, *extra: str) -> dict:
    env = dict(os.environ, HF_ENDPOINT=hub.url, HF_HUB_OFFLINE="0", ONBOARD_QUEUE_DB=str(db),
               ONBOARD_RUN_COMMAND=recorder_command(log))  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "onboard", "watch", "--author", "acme", "--once", "--json", *extra],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_watch_once_cli_runs_new_model_for_each_new_revision(listing_hub: Hub, tmp_path: Path) -> None:
    hub, _ = listing_hub
    db, log = tmp_path / "q.sqlite", tmp_path / "calls.jsonl"
    hub.add_repo("acme/alpha", tmp_path, sha=sha_for("alpha", 1))
    out = _watch_cli(hub, db, log)
    assert [(j["repo"], j["state"]) for j in out["jobs"]] == [("acme/alpha", "done")]
    assert _watch_cli(hub, db, log)["jobs"] == []  # unchanged: nothing runs
    hub.add_repo("acme/alpha", tmp_path, sha=sha_for("alpha", 2))
    out = _watch_cli(hub, db, log)
    assert [c["kind"] for c in out["poll"]["changes"]] == ["new-revision"]
    assert [c["argv"] for c in read_calls(log)] == [
        ["acme/alpha", sha_for("alpha", 1)],
        ["acme/alpha", sha_for("alpha", 2)],
    ]


def test_watch_loop_polls_runs_and_stops_on_sigterm(listing_hub: Hub, tmp_path: Path) -> None:
    import signal
    import time

    hub, listing = listing_hub
    db, log = tmp_path / "q.sqlite", tmp_path / "calls.jsonl"
    hub.add_repo("acme/alpha", tmp_path, sha=sha_for("alpha", 1))
    env = dict(os.environ, HF_ENDPOINT=hub.url, HF_HUB_OFFLINE="0", ONBOARD_RUN_COMMAND=recorder_command(log))
    proc = subprocess.Popen(
        [sys.executable, "-m", "onboard", "watch", "--author", "acme", "--interval", "1", "--db", str(db)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while len(read_calls(log)) < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        hub.add_repo("acme/alpha", tmp_path, sha=sha_for("alpha", 2))  # picked up by a later poll
        while len(read_calls(log)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert [c["argv"][1] for c in read_calls(log)] == [sha_for("alpha", 1), sha_for("alpha", 2)]
    assert sum(status == 200 for _, status, _ in listing.requests) >= 2
