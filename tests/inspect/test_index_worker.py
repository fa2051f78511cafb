"""index_worker: the index matched against the headers in a forked worker gives what inspect gives without it.

The cases run in a fresh interpreter (tests/inspect/index_worker_cases.py): the worker forks only a single-threaded
process, and this one has threads (torch, the hub server fixtures).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from onboard.inspect_checkpoint import index_worker
from onboard.inspect_checkpoint.safetensors_header import read_local_header
from onboard.inspect_checkpoint.source import open_source
from tests import malformed as M

REPO = Path(__file__).resolve().parents[2]
MATCHING = {
    "valid",
    "index_order",
    "many_shards",
}  # every other case has an index the headers contradict, or an odd one


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONHASHSEED", "ONBOARD_INSPECT_FORK")}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run(
        [sys.executable, "-m", "tests.inspect.index_worker_cases", str(tmp_path_factory.mktemp("cases"))],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_worker_runs_and_changes_nothing(cases: dict) -> None:
    from tests.inspect.index_worker_cases import CASES

    assert set(CASES) <= cases.keys()
    for name in CASES:
        without = cases[name]["without"]
        assert not without["worker"], name
        for way in ("with", "split", "failing"):
            run = cases[name][way]
            assert run["worker"], (name, way)
            assert run["result"] == without["result"], (name, way)  # the same profile, or the same error
            assert run.get("shards") == without.get("shards"), (name, way)  # grouped in the same order
        assert cases[name]["with"]["matched"] == cases[name]["split"]["matched"] == (name in MATCHING), name
        assert not cases[name]["failing"]["matched"], name  # no digest: the index is decoded here, as without
    assert cases["index_order"]["with"]["shards"] == ["a.safetensors", "b.safetensors"]  # sorted, not the index's
    # The cases do find what they were built for: the fallback is exercised, not just the fast path.
    codes = {name: [f["code"] for f in cases[name]["with"]["result"]["findings"]] for name in CASES
             if isinstance(cases[name]["with"]["result"], dict)}  # fmt: skip
    assert codes["valid"] == [] and codes["index_order"] == []
    assert "tensor-missing" in codes["swapped_tensors"] and "tensor-not-indexed" in codes["swapped_tensors"]
    assert codes["stale_extra_shard"] == ["extra-shard"]
    assert cases["index_not_json"]["with"]["result"].startswith("ConfigError: model.safetensors.index.json")


def test_the_worker_reads_and_groups_the_shards_after_the_first(cases: dict) -> None:
    """Left every shard but the first, the worker's grouped part is what inspect uses where the index matches, and
    it changes nothing: the profile is the one read without the worker."""
    for name in MATCHING:
        split = cases[name]["split"]
        here = split["read_here"]
        # This process read a prefix: its first shard, more where the worker got ahead of it, none where the worker
        # claimed them all first (a busy machine); the worker read the rest, at least one.
        assert len(here) < len(split["shards"]) and here == split["shards"][: len(here)], name
    many = cases["many_shards"]["split"]
    assert len(many["shards"]) == 6 and many["result"]["parameters"]["total"] > 0
    templates = {t["template"]: t["count"] for t in many["result"]["tensor_templates"]}
    assert templates["model.layers.{}.self_attn.q_proj.weight"] == 12  # BF16 layer 10 and the F32 rest
    # A shard the worker cannot read: this process reads it again and reports it, as without the worker.
    truncated = cases["truncated_shard"]["split"]
    assert truncated["read_here"] == truncated["shards"] and not truncated["matched"]


def test_the_two_processes_claim_each_shard_once(cases: dict) -> None:
    race = cases["_claims_race"]
    assert race["each_once"] and race["front_first"] and race["back_last"], race
    assert race["front"] > 0 and race["back"] > 0, race  # they did race: both claimed some


def test_this_process_leaves_the_worker_its_share() -> None:
    """Claiming alone from the front, this process stops once the rest would keep the worker busy until its own
    grouping ends (GROUP_SHARE of the lead it has); the worker then takes every position left."""
    claims = index_worker._Claims(100)
    try:
        front = []
        while (i := claims.front()) is not None:
            front.append(i)
        back = []
        while (i := claims.back()) is not None:
            back.append(i)
    finally:
        claims.close()
    # It stops at the first lead `a` where the 100 - a unclaimed are at most a × GROUP_SHARE (80 of 100 at 1/4).
    assert len(front) == math.ceil(100 / (1 + index_worker.GROUP_SHARE))
    assert front == list(range(len(front))) and back == list(range(99, len(front) - 1, -1))


def test_no_worker_is_left_behind(cases: dict) -> None:
    assert cases["_children_left"] is False


def test_no_fork_with_threads_or_a_small_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = open_source(str(M.valid(tmp_path / "r")))
    monkeypatch.setattr(index_worker, "spare_cpu", lambda: True)
    monkeypatch.setattr(index_worker, "single_threaded", lambda: True)
    monkeypatch.setattr(index_worker, "FORK_FROM_BYTES", 0)
    monkeypatch.setattr(index_worker, "FORK_MAX_RSS", 1 << 62)  # this test process may hold gigabytes by now
    assert index_worker._usable(src) == (sys.platform == "linux")
    monkeypatch.setenv("ONBOARD_INSPECT_FORK", "0")
    assert not index_worker._usable(src)
    monkeypatch.delenv("ONBOARD_INSPECT_FORK")
    monkeypatch.setattr(index_worker, "FORK_FROM_BYTES", src.file_size("model.safetensors.index.json") + 1)
    assert not index_worker._usable(src)
    monkeypatch.setattr(index_worker, "FORK_FROM_BYTES", 0)
    monkeypatch.setattr(index_worker, "FORK_MAX_RSS", 1)  # a process this large would copy too much to fork
    assert not index_worker._usable(src)
    monkeypatch.undo()
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert not index_worker.single_threaded()
    finally:
        stop.set()
        thread.join()


def test_a_shard_holds_what_the_index_lists_in_either_order(tmp_path: Path) -> None:
    """The index's names per shard match a header's by an ordered hash where the orders agree (one dtype, names
    sorted), else by the set: a reordered shard still matches, a different name or count does not."""
    path = M.write_safetensors(tmp_path / "a.safetensors", M.header_dict({"x": ("F32", [2]), "y": ("BF16", [2])}))
    headers = {"a.safetensors": read_local_header(path, "a.safetensors")}

    def listing(*names: str) -> index_worker.IndexDigest:
        return index_worker.IndexDigest({"a.safetensors": (len(names), hash(names), hash(frozenset(names)))})

    assert index_worker._holds(listing("x", "y"), headers, ["a.safetensors"])
    assert index_worker._holds(listing("y", "x"), headers, ["a.safetensors"])  # the set decides
    assert not index_worker._holds(listing("x", "z"), headers, ["a.safetensors"])
    assert not index_worker._holds(listing("x"), headers, ["a.safetensors"])
    both = ["a.safetensors", "b.safetensors"]  # a folder shard the index does not list
    assert not index_worker._holds(listing("x", "y"), headers, ["a.safetensors"], everything=both)
