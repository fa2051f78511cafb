# ruff: noqa: F811  (pytest fixtures imported from tests.hubserver are used as parameters)
"""What a hub inspect asks the hub for, counted on the loopback server (issue 12 §1).

Header ranges sized from the index (one request per shard; exactly one more for a shard whose header is longer than
its estimate), Retry-After waited out on a 429, requests in flight bounded by ONBOARD_HUB_CONCURRENCY, and one
listing per new-model run.
"""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

import pytest

from onboard.errors import InputError
from onboard.inspect_checkpoint import hub, hub_headers
from onboard.inspect_checkpoint.checkpoint_types import SafetensorsHeader
from onboard.inspect_checkpoint.source import open_source
from tests import malformed as M
from tests.hubserver import HubServer, hub_env, hub_server  # noqa: F401  (fixtures)

REPO = "org/sharded"
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
TRAINED = Path(__file__).resolve().parents[1] / "fixtures" / "trained-qwen3"


def _sharded_repo(root: Path, shards: int, per_shard: int = 40, long_metadata: dict[int, int] | None = None) -> Path:
    """config.json, an index and `shards` shards of `per_shard` expert tensors each; shard k gets a __metadata__
    value of long_metadata[k] characters (a header longer than the index can predict)."""
    root = M.write_repo(root, {})
    weight_map: dict[str, str] = {}
    for k in range(shards):
        name = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        tensors = {f"model.layers.{k}.mlp.experts.{j}.down_proj.weight": ("BF16", [16, 8]) for j in range(per_shard)}
        header = M.header_dict(tensors)
        if long_metadata and k in long_metadata:
            header["__metadata__"] = {"format": "pt", "note": "x" * long_metadata[k]}
        M.write_safetensors(root / name, header)
        weight_map.update(dict.fromkeys(tensors, name))
    (root / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return root


def _header_len(path: Path) -> int:
    with open(path, "rb") as f:
        return struct.unpack("<Q", f.read(8))[0]


def _ranges(server: HubServer, name: str) -> list[str | None]:
    return [r[2] for r in server.stats.requests if r[1].endswith("/" + name)]


def test_estimates_hold_real_headers_within_a_few_percent(tmp_path: Path) -> None:
    """Calibration: on the DeepSeek-V3-shaped synthetic (real dims, compact JSON as safetensors writes it) and on the
    trained fixture (written by safetensors itself), every estimate covers its header with a small margin."""
    sys.path.insert(0, str(BENCHMARKS))
    import _synthetic

    for root in (_synthetic.build(tmp_path / "ds", quick=True, shards=8), TRAINED):
        src = open_source(str(root))
        shards = src.safetensors_files()
        headers = src.read_headers(shards)
        weight_map = {t: s for s in shards for t in headers[s].tensors}  # type: ignore[union-attr]  # the index's
        ranges = hub_headers.header_ranges(weight_map, {s: src.file_size(s) for s in shards})
        assert set(ranges) == set(shards)
        for shard in shards:
            need = 8 + _header_len(root / shard)
            assert need <= ranges[shard] <= 1.2 * need + 512, (root.name, shard, need, ranges[shard])


def test_one_request_per_shard_and_one_more_only_for_a_longer_header(hub_env: HubServer, tmp_path: Path) -> None:
    root = _sharded_repo(tmp_path / "repo", 3, long_metadata={1: 20_000})
    hub_env.add_repo(REPO, root)
    src = open_source(REPO)
    headers = src.read_headers(src.safetensors_files())
    names = sorted(headers)
    assert all(isinstance(h, SafetensorsHeader) and len(h.tensors) == 40 for h in headers.values())
    estimate = hub_headers.header_ranges(src.index()["weight_map"], {n: src.file_size(n) for n in names})  # type: ignore[index]
    for i, name in enumerate(names):
        need = 8 + _header_len(root / name)
        if i == 1:  # 20 KB of metadata the index knows nothing about: the estimate is short, one more request
            assert estimate[name] < need
            assert _ranges(hub_env, name) == [f"bytes=0-{estimate[name] - 1}", f"bytes={estimate[name]}-{need - 1}"]
        else:
            assert estimate[name] >= need
            assert _ranges(hub_env, name) == [f"bytes=0-{estimate[name] - 1}"]
    assert hub_env.stats.count("GET", "/api/models/") == 1
    header_bytes = sum(8 + _header_len(root / n) for n in names)
    assert header_bytes <= src.bytes_fetched <= 1.25 * header_bytes


def _gap_after_first(server: HubServer, contains: str) -> float:
    times = [t for (_, path, _), t in zip(server.stats.requests, server.stats.times) if contains in path]
    assert len(times) >= 2, f"{contains}: {len(times)} request(s)"
    return times[1] - times[0]


def test_429_retry_after_is_waited_out(hub_env: HubServer, tmp_path: Path) -> None:
    """A 429 with Retry-After: 1 on the listing, on a header range and on a small file: each is asked again, no
    sooner than a second later, and the inspect succeeds."""
    hub_env.add_repo(REPO, _sharded_repo(tmp_path / "repo", 2))
    hub_env.add_fault("/api/models/", 429, times=1, retry_after=1)
    hub_env.add_fault("model-00002-of-00002.safetensors", 429, times=1, retry_after=1)
    hub_env.add_fault("config.json", 429, times=1, retry_after=1)
    src = open_source(REPO)
    assert src.read_json("config.json")["model_type"] == "llama"  # type: ignore[index]
    headers = src.read_headers(src.safetensors_files())
    assert all(isinstance(h, SafetensorsHeader) for h in headers.values())
    assert hub_env.stats.count("GET", "/api/models/") == 2
    assert len(_ranges(hub_env, "model-00002-of-00002.safetensors")) == 2
    for contains in ("/api/models/", "model-00002-of-00002.safetensors", "config.json"):
        assert 1.0 <= _gap_after_first(hub_env, contains) < 10, contains


def test_requests_in_flight_are_bounded_by_the_limit(
    hub_env: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub_env.add_repo(REPO, _sharded_repo(tmp_path / "repo", 12, per_shard=4))
    hub_env.latency = 0.1  # every request stays open long enough to overlap with the others
    monkeypatch.setenv(hub.CONCURRENCY_ENV, "3")
    src = open_source(REPO)
    assert all(isinstance(h, SafetensorsHeader) for h in src.read_headers(src.safetensors_files()).values())
    assert hub_env.stats.max_in_flight == 3
    hub_env.reset_stats()
    monkeypatch.setenv("ONBOARD_CACHE", str(tmp_path / "cold-cache"))  # every header asked for again
    monkeypatch.delenv(hub.CONCURRENCY_ENV)
    assert hub.concurrency() == hub.DEFAULT_CONCURRENCY > 3
    src = open_source(REPO)
    src.read_headers(src.safetensors_files())
    assert hub_env.stats.max_in_flight > 3  # the default lets the 12 shards go at once
    for bad in ("0", "many"):
        monkeypatch.setenv(hub.CONCURRENCY_ENV, bad)
        with pytest.raises(InputError, match=hub.CONCURRENCY_ENV):
            hub.concurrency()


def test_a_listing_passed_down_is_not_asked_again(hub_env: HubServer, tmp_path: Path) -> None:
    sha = hub_env.add_repo(REPO, _sharded_repo(tmp_path / "repo", 2))
    listing = hub.list_repo(REPO, None)
    assert listing.sha == sha and {f.path for f in listing.files} >= {"config.json", "model.safetensors.index.json"}
    hub_env.reset_stats()
    for revision in (None, sha):  # as the caller asked for it, or by the commit it resolved to
        src = open_source(REPO, revision, listing=listing)
        assert src.revision == sha and src.files == listing.files
    assert hub_env.stats.count("GET", "/api/models/") == 0
    with pytest.raises(Exception, match="revision"):  # a listing of another revision is not reused
        open_source(REPO, "v2", listing=listing)
    assert hub_env.stats.count("GET", "/api/models/") == 1


def test_new_model_lists_the_repo_once(hub_env: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run folder is named from the listing; inspect reads from the same one, verify-tokenizer asks by the
    resolved sha (its cached listing), and the stages that need the files fetch them from the listing: one listing
    request for the run (snapshot_download would have listed the tree again)."""
    from onboard import pipeline
    from onboard.pipeline.stages import _ensure_local

    monkeypatch.setattr(
        pipeline, "STAGES", tuple(s for s in pipeline.STAGES if s.name in ("inspect", "verify-tokenizer"))
    )
    sha = hub_env.add_repo(REPO, TRAINED)
    result = pipeline.run_new_model(REPO, workspace=tmp_path / "ws", quiet=True)
    assert result.revision == sha
    assert {k: v["outcome"] for k, v in result.stages.items()} == {"inspect": "ok", "verify-tokenizer": "ok"}
    assert json.loads((result.run_dir / "profile.json").read_text())["revision"] == sha
    listings = [p for _, p, _ in hub_env.stats.requests if p.startswith("/api/models/")]
    assert listings == [f"/api/models/{REPO}"]
    ctx = pipeline.RunContext(
        REPO, sha, "s", tmp_path, tmp_path, listing=hub.list_repo(REPO, sha)
    )  # cached: no request
    _ensure_local(ctx)
    assert ctx.local_dir is not None and ctx.local_dir.name == sha
    assert (ctx.local_dir / "model.safetensors").stat().st_size == (TRAINED / "model.safetensors").stat().st_size
    assert [p for _, p, _ in hub_env.stats.requests if p.startswith("/api/models/")] == listings


def test_a_listing_by_commit_is_read_from_the_cache_a_branch_is_asked_again(hub_env: HubServer, tmp_path: Path) -> None:
    sha = hub_env.add_repo(REPO, _sharded_repo(tmp_path / "repo", 1))
    first = hub.list_repo(REPO, None)
    assert hub.list_repo(REPO, sha).files == first.files
    assert hub_env.stats.count("GET", "/api/models/") == 1  # a commit's files never change
    hub.list_repo(REPO, "main")
    assert hub_env.stats.count("GET", "/api/models/") == 2  # a branch can move


def test_small_files_come_in_one_get_each_and_a_vanished_one_reads_as_absent(
    hub_env: HubServer, tmp_path: Path
) -> None:
    root = _sharded_repo(tmp_path / "repo", 2)
    (root / "tokenizer_config.json").write_text('{"model_max_length": 8}')
    hub_env.add_repo(REPO, root)
    hub_env.add_fault("tokenizer_config.json", 404, error_code="EntryNotFound")  # listed, then gone
    src = open_source(REPO)
    assert src.read_json("config.json")["model_type"] == "llama"  # type: ignore[index]
    assert src.index()["weight_map"]  # type: ignore[index]
    assert src.read_json("tokenizer_config.json") is None
    for name in ("config.json", "model.safetensors.index.json"):  # a GET each, no HEAD first
        assert [r[0] for r in hub_env.stats.requests if r[1].endswith("/" + name)] == ["GET"], name


def test_verify_tokenizer_asks_only_for_tokenizer_files(hub_env: HubServer, tmp_path: Path) -> None:
    """No index, no safetensors header, no speculative config/index GET beside the listing: a tokenizer check of a
    sharded repo reads only the listing and the tokenizer's own files (each once, started together)."""
    import shutil

    from onboard.verify_tokenizer.repo import TOKENIZER_FILES, open_tokenizer_repo

    root = _sharded_repo(tmp_path / "repo", 3)
    for name in ("vocab.json", "merges.txt", "tokenizer_config.json"):
        shutil.copy(TRAINED / name, root / name)
    hub_env.add_repo(REPO, root)
    repo = open_tokenizer_repo(REPO)
    paths = [p for method, p, _ in hub_env.stats.requests if method == "GET"]
    fetched = sorted(p.rsplit("/", 1)[-1] for p in paths if "/resolve/" in p)
    assert fetched == ["config.json", "merges.txt", "tokenizer_config.json", "vocab.json"], paths
    assert not [p for p in paths if p.endswith((".safetensors", "index.json"))]
    assert [p for p in paths if p.startswith("/api/models/")] == [f"/api/models/{REPO}"]
    assert (repo.root / "vocab.json").is_file() and "config.json" in TOKENIZER_FILES
