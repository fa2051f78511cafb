# ruff: noqa: F811  (pytest fixtures imported from tests.hubserver are used as parameters)
"""Hub sources against the loopback hub server, through the real huggingface_hub client.

Covers: sha + listing, revisions, concurrent range-request headers (one request per shard), the header cache and
offline mode, never downloading weights, agreement with huggingface_hub's own safetensors reader, and every hub
failure mapped to a clean OnboardError.
"""

from __future__ import annotations

import email.utils
import json
import re
import time
from pathlib import Path

import pytest

from onboard.errors import HubError, InputError, SourceNotFound
from onboard.inspect_checkpoint import hub, hub_headers
from onboard.inspect_checkpoint.checkpoint_types import SafetensorsHeader
from onboard.inspect_checkpoint.source import HubSource, open_source
from tests import malformed as M
from tests.hubserver import HubServer, fake_sha, hub_env, hub_server  # noqa: F401  (fixtures)

REPO = "org/tiny"


def _long_header_shard(path: Path, n: int = 1500) -> dict[str, tuple[str, list[int]]]:
    tensors = {f"model.layers.{i}.mlp.experts.{j}.weight": ("BF16", [4, 4]) for i in range(n // 10) for j in range(10)}
    M.write_safetensors(path, M.header_dict(tensors))
    return tensors


def test_resolve_listing_and_headers(hub_env: HubServer, tmp_path: Path) -> None:
    root = M.valid(tmp_path / "repo")
    sha = hub_env.add_repo(REPO, root)
    with open_source(REPO) as src:
        assert isinstance(src, HubSource) and src.repo_id == REPO and src.revision == sha and src.local_dir is None
        sizes = {f.path: f.size for f in src.files}
        assert sizes["config.json"] == (root / "config.json").stat().st_size
        assert src.read_json("config.json")["model_type"] == "llama"
        assert src.read_json("generation_config.json") is None  # not in the listing: no request at all
        shards = src.safetensors_files()
        headers = src.read_headers(shards)
    for name in shards:
        local = M.header_dict(M.split_two()[name])
        h = headers[name]
        assert isinstance(h, SafetensorsHeader) and h.file_size == sizes[name]
        assert {n: list(t.data_offsets) for n, t in h.tensors.items()} == {
            n: v["data_offsets"] for n, v in local.items() if n != "__metadata__"
        }
    ranged = [r for r in hub_env.stats.requests if r[1].endswith(".safetensors")]
    assert len(ranged) == len(shards) and all(r[0] == "GET" and r[2] and r[2].startswith("bytes=0-") for r in ranged)
    assert 0 < src.bytes_fetched <= sum(sizes[s] for s in shards)
    assert not any(r[1].endswith("generation_config.json") for r in hub_env.stats.requests)


def test_long_header_takes_a_second_range_for_the_rest_only(hub_env: HubServer, tmp_path: Path) -> None:
    root = M.write_repo(tmp_path / "repo", {})
    tensors = _long_header_shard(root / "model.safetensors")
    hub_env.add_repo(REPO, root)
    src = open_source(REPO)
    header = src.read_headers(["model.safetensors"])["model.safetensors"]
    assert isinstance(header, SafetensorsHeader) and len(header.tensors) == len(tensors) > 1000
    assert header.header_len > hub_headers.FIRST_RANGE
    ranges = [r[2] for r in hub_env.stats.requests if r[1].endswith("model.safetensors")]
    assert ranges == [
        f"bytes=0-{hub_headers.FIRST_RANGE - 1}",
        f"bytes={hub_headers.FIRST_RANGE}-{8 + header.header_len - 1}",
    ]
    assert src.bytes_fetched == 8 + header.header_len


def test_revisions(hub_env: HubServer, tmp_path: Path) -> None:
    v1 = M.write_repo(tmp_path / "v1")
    v2 = M.valid(tmp_path / "v2")
    sha1 = hub_env.add_repo(REPO, v1, "main")
    sha2 = hub_env.add_repo(REPO, v2, "v2")
    assert open_source(REPO).revision == sha1
    assert open_source(REPO, revision="v2").revision == sha2
    by_sha = open_source(REPO, revision=sha2)
    assert by_sha.revision == sha2 and by_sha.index() is not None
    with pytest.raises(SourceNotFound, match="revision"):
        open_source(REPO, revision="nope")


def test_header_cache_and_offline_mode(hub_env: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hub_env.add_repo(REPO, M.valid(tmp_path / "repo"))
    online = open_source(REPO)
    first = online.read_headers(online.safetensors_files())
    online.read_json("config.json")
    hub_env.reset_stats()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    offline = open_source(REPO)
    assert offline.revision == online.revision and offline.files == online.files
    assert offline.read_json("config.json")["model_type"] == "llama"
    again = offline.read_headers(offline.safetensors_files())
    assert {k: dict(v.tensors) for k, v in again.items()} == {k: dict(v.tensors) for k, v in first.items()}
    assert hub_env.stats.requests == []  # nothing touched the network
    with pytest.raises(SourceNotFound) as info:
        open_source("org/never-seen")
    assert "HF_HUB_OFFLINE" in info.value.message and info.value.hint


def test_offline_uncached_file_is_a_clear_error(hub_env: HubServer, tmp_path: Path, monkeypatch) -> None:
    root = M.valid(tmp_path / "repo")
    (root / "tokenizer.json").write_text("{}")
    hub_env.add_repo(REPO, root)
    open_source(REPO, prefetch=False)  # listing cached, nothing else
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    src = open_source(REPO)
    with pytest.raises(SourceNotFound, match="tokenizer.json.*HF_HUB_OFFLINE"):
        src.read_json("tokenizer.json")
    with pytest.raises(SourceNotFound, match="index.json.*HF_HUB_OFFLINE"):
        src.safetensors_files()
    with pytest.raises(SourceNotFound, match="header.*HF_HUB_OFFLINE"):
        src.read_headers(["model-00001-of-00002.safetensors"])


def test_weights_are_never_downloaded(hub_env: HubServer, tmp_path: Path) -> None:
    root = M.valid(tmp_path / "repo")
    (root / "pytorch_model.bin").write_bytes(b"x" * 100)
    hub_env.add_repo(REPO, root)
    src = open_source(REPO)
    src.read_headers(src.safetensors_files())
    for weights in ("model-00001-of-00002.safetensors", "pytorch_model.bin"):
        with pytest.raises(InputError, match="never downloaded"):
            src.path_of(weights)
    weight_requests = [r for r in hub_env.stats.requests if r[1].endswith((".safetensors", ".bin"))]
    assert all(r[2] is not None for r in weight_requests)  # every weight request is a Range request


def test_agrees_with_huggingface_hub_reader(hub_env: HubServer, tmp_path: Path) -> None:
    from huggingface_hub import HfApi

    root = M.valid(tmp_path / "repo")
    _long_header_shard(root / "model-00002-of-00002.safetensors", 1200)
    shards = M.split_two()
    index = M.make_index({"model-00001-of-00002.safetensors": shards["model-00001-of-00002.safetensors"]})
    index["weight_map"].update(
        {
            t: "model-00002-of-00002.safetensors"
            for t in json.loads(_header_json(root / "model-00002-of-00002.safetensors"))
        }
    )
    (root / "model.safetensors.index.json").write_text(json.dumps(index))
    hub_env.add_repo(REPO, root)
    theirs = HfApi(endpoint=hub_env.url).get_safetensors_metadata(REPO)
    src = open_source(REPO)
    ours = src.read_headers(src.safetensors_files())
    assert set(ours) == set(theirs.files_metadata)
    for name, meta in theirs.files_metadata.items():
        mine = ours[name]
        assert isinstance(mine, SafetensorsHeader)
        assert {n: (t.dtype, list(t.shape), t.data_offsets) for n, t in mine.tensors.items()} == {
            n: (t.dtype, list(t.shape), tuple(t.data_offsets)) for n, t in meta.tensors.items()
        }


def _header_json(path: Path) -> bytes:
    data = path.read_bytes()
    n = int.from_bytes(data[:8], "little")
    doc = json.loads(data[8 : 8 + n])
    doc.pop("__metadata__", None)
    return json.dumps(doc).encode()


# -- failures ---------------------------------------------------------------------------------------------------------


def test_repo_not_found_and_gated(hub_env: HubServer, tmp_path: Path) -> None:
    with pytest.raises(SourceNotFound) as info:
        open_source("org/missing")
    assert "org/missing" in info.value.message and "HF_TOKEN" in (info.value.hint or "")
    hub_env.add_repo("org/gated", M.valid(tmp_path / "g"))
    hub_env.gated.add("org/gated")
    with pytest.raises(HubError) as info:
        open_source("org/gated")
    assert "gated" in info.value.message and "org/gated" in info.value.message


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (lambda info: info.update(sha="../../outside"), r"Expected `str` matching regex .* - at `\$\.sha`"),
        (lambda info: info.update(siblings="all"), r"Expected `array`, got `str` - at `\$\.siblings`"),
        (lambda info: info["siblings"][0].update(rfilename=5), r"got `int` - at `\$\.siblings\[0\]\.rfilename`"),
        (lambda info: info["siblings"][0].update(size=-1), r"Expected `int` >= 0 - at `\$\.siblings\[0\]\.size`"),
        (lambda info: info["siblings"].__setitem__(0, None), r"Expected `object`, got `null` - at `\$\.siblings\[0\]`"),
    ],
)
def test_a_model_info_answer_the_hub_never_gives_is_a_hub_error_naming_the_field(
    hub_env: HubServer, tmp_path: Path, edit, says: str
) -> None:
    # A mirror or proxy answering in another shape: each of these was an internal error (KeyError, TypeError,
    # AttributeError) deep in the listing's users; the sha also names cache folders and URLs.
    sha = hub_env.add_repo(REPO, M.valid(tmp_path / "repo"))
    files = sorted(p.name for p in (tmp_path / "repo").iterdir())
    info = {"id": REPO, "sha": sha, "siblings": [{"rfilename": name, "size": 1} for name in files]}
    edit(info)
    hub_env.add_route("GET", r"^/api/models/org/tiny(\?.*)?$", lambda handler, _match: handler.send_json(info))
    with pytest.raises(HubError) as caught:
        open_source(REPO)
    assert caught.value.message.startswith(f"hub repo {REPO!r}: the hub's model info: "), caught.value.message
    assert re.search(says, caught.value.message), caught.value.message
    assert "HF_ENDPOINT" in (caught.value.hint or "")


def test_5xx_is_retried_then_succeeds(hub_env: HubServer, tmp_path: Path) -> None:
    hub_env.add_repo(REPO, M.valid(tmp_path / "repo"))
    hub_env.add_fault("/api/models/", 503, times=2)
    hub_env.add_fault("model-00001", 502, times=1)
    src = open_source(REPO)
    assert all(isinstance(h, SafetensorsHeader) for h in src.read_headers(src.safetensors_files()).values())
    assert hub_env.stats.count("GET", "/api/models/") == 3
    assert hub_env.stats.count("GET", "model-00001") == 2


def test_5xx_forever_is_a_hub_error(hub_env: HubServer, tmp_path: Path) -> None:
    hub_env.add_repo(REPO, M.valid(tmp_path / "repo"))
    hub_env.add_fault("/api/models/", 500)
    with pytest.raises(HubError) as info:
        open_source(REPO)
    assert "HTTP 500" in info.value.message and "4 tries" in info.value.message and REPO in info.value.message
    assert hub_env.stats.count("GET", "/api/models/") == 4


def test_5xx_on_a_shard_is_a_hub_error_naming_it(hub_env: HubServer, tmp_path: Path) -> None:
    hub_env.add_repo(REPO, M.valid(tmp_path / "repo"))
    hub_env.add_fault("model-00002", 500)
    src = open_source(REPO)
    with pytest.raises(HubError, match="model-00002-of-00002.safetensors.*HTTP 500"):
        src.read_headers(src.safetensors_files())


def test_dropped_connections(hub_env: HubServer, tmp_path: Path) -> None:
    hub_env.add_repo(REPO, M.valid(tmp_path / "repo"))
    hub_env.add_fault("model-00001", drop=True, times=1)
    src = open_source(REPO)
    assert all(isinstance(h, SafetensorsHeader) for h in src.read_headers(src.safetensors_files()).values())
    hub_env.add_fault("/api/models/", drop=True)
    with pytest.raises(HubError, match="dropped"):
        open_source(REPO)


def test_timeout(hub_env: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hub_env.add_repo(REPO, M.valid(tmp_path / "repo"))
    monkeypatch.setattr(hub, "TIMEOUT_S", 0.2)
    monkeypatch.setattr(hub, "RETRIES", 1)
    hub_env.latency = 0.5
    start = time.monotonic()
    with pytest.raises(HubError, match="no answer"):
        open_source(REPO)
    assert time.monotonic() - start < 3


def _rate_limited(retry_after: str) -> Exception:
    import httpx2
    from huggingface_hub.errors import HfHubHTTPError

    answer = httpx2.Response(429, headers={"Retry-After": retry_after}, request=httpx2.Request("GET", "http://hub/x"))
    return HfHubHTTPError("429 Too Many Requests", response=answer)


def test_with_retries_waits_out_retry_after_in_seconds_or_as_a_date(monkeypatch: pytest.MonkeyPatch) -> None:
    """hf_hub_download's calls (hub.with_retries) wait what a 429 asks, in either of Retry-After's forms."""
    slept: list[float] = []
    monkeypatch.setattr(hub.time, "sleep", slept.append)
    in_30_s = email.utils.formatdate(time.time() + 30, usegmt=True)
    failures = iter([_rate_limited("7"), _rate_limited(in_30_s), _rate_limited("soon")])

    def call() -> str:
        failure = next(failures, None)
        if failure is not None:
            raise failure
        return "done"

    assert hub.with_retries(call, "config.json of hub repo 'org/tiny'") == "done"
    assert slept[0] == 7 and 27 < slept[1] <= 30
    assert slept[2] == hub.RETRY_BASE_S * 4  # unreadable: the backoff's own step


def test_missing_file_in_listing_and_404_shard(hub_env: HubServer, tmp_path: Path) -> None:
    hub_env.add_repo(REPO, M.valid(tmp_path / "repo"))
    src = open_source(REPO, prefetch=False)
    hub_env.add_fault("model-00001", 404, error_code="EntryNotFound")
    result = src.read_headers(["model-00001-of-00002.safetensors", "not-listed.safetensors"])
    assert result["model-00001-of-00002.safetensors"].code == "missing-shard"  # type: ignore[union-attr]
    assert result["not-listed.safetensors"].code == "missing-shard"  # type: ignore[union-attr]


def test_server_ignoring_range_is_cut_short(hub_env: HubServer, tmp_path: Path) -> None:
    root = M.write_repo(tmp_path / "repo", {})
    big = {**M.TENSORS, "big.weight": ("F32", [50 * 2**18])}  # 50 MB of data (a sparse hole)
    M.write_safetensors(root / "model.safetensors", M.header_dict(big))
    hub_env.add_repo(REPO, root)
    hub_env.honour_range = False
    src = open_source(REPO)
    header = src.read_headers(["model.safetensors"])["model.safetensors"]
    assert isinstance(header, SafetensorsHeader) and len(header.tensors) == len(big)
    assert src.bytes_fetched < 4 * 2**20


def test_fake_sha_is_40_hex() -> None:
    sha = fake_sha(REPO, "main")
    assert len(sha) == 40 and int(sha, 16) >= 0


@pytest.mark.parametrize(
    "blobs",
    [
        {},
        {"model.safetensors": b""},
        {"é/model-00001-of-00002.safetensors": bytes(range(256)) * 300, "b": b"\x00" * 70},
    ],
)
def test_header_pack_round_trip(blobs: dict[str, bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ONBOARD_CACHE", str(tmp_path / "cache"))
    hub_headers.write_header_pack("org/m", "a" * 40, blobs)
    read = hub_headers.read_header_pack("org/m", "a" * 40)
    assert read == blobs and list(read) == list(blobs)  # the shards' order kept
    assert hub_headers.read_header_pack("org/m", "b" * 40) == {}  # another commit: nothing cached


def test_a_damaged_header_pack_reads_as_empty(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ONBOARD_CACHE", str(tmp_path / "cache"))
    hub_headers.write_header_pack("org/m", "a" * 40, {"model.safetensors": b"x" * 100})
    path = hub_headers._header_pack_path("org/m", "a" * 40)
    path.write_bytes(path.read_bytes()[:50])  # cut short
    assert hub_headers.read_header_pack("org/m", "a" * 40) == {}
