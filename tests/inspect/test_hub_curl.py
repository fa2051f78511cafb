# ruff: noqa: F811  (pytest fixtures imported from tests.hubserver are used as parameters)
"""Header ranges' first tries through libcurl (inspect_checkpoint/curl_fetch.py, hub_headers.header_future), on the loopback
hub: the same bytes as through huggingface_hub's client, every failure handed to huggingface_hub's backoff (a 5xx, a
dropped connection, a 429's Retry-After waited out) or classified as it classifies it (a 404 is a missing shard, with
no request more), redirects followed without the token to another host, and HTTPS trusting what httpx trusts."""

from __future__ import annotations

import json
import shutil
import ssl
import struct
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from onboard.errors import HubError
from onboard.inspect_checkpoint import curl_fetch, hub, hub_client, hub_headers
from onboard.inspect_checkpoint.checkpoint_types import SafetensorsHeader
from onboard.inspect_checkpoint.source import open_source
from tests import malformed as M
from tests.hubserver import HubServer, hub_env, hub_server  # noqa: F401  (fixtures)

pytestmark = pytest.mark.skipif(not curl_fetch.available(), reason="pycurl (a dependency) is not importable here")
REPO = "org/sharded"


def _repo(root: Path, shards: int = 3) -> Path:
    root = M.write_repo(root, {})
    weight_map: dict[str, str] = {}
    for k in range(shards):
        name = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        tensors = {f"model.layers.{k}.mlp.experts.{j}.down_proj.weight": ("BF16", [16, 8]) for j in range(30)}
        M.write_safetensors(root / name, M.header_dict(tensors))
        weight_map.update(dict.fromkeys(tensors, name))
    (root / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return root


@pytest.fixture
def first_tries(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The URLs whose first try went through libcurl."""
    urls: list[str] = []
    fetch = curl_fetch.fetch_range

    def counted(url: str, *args: object, **kwargs: object) -> None:
        urls.append(url)
        fetch(url, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(curl_fetch, "fetch_range", counted)
    return urls


def _shard_requests(server: HubServer, shard: str) -> list[tuple[str, str, str | None]]:
    return [r for r in server.stats.requests if r[1].endswith("/" + shard)]


def _read(monkeypatch: pytest.MonkeyPatch, cache: Path) -> dict[str, SafetensorsHeader]:
    monkeypatch.setenv("ONBOARD_CACHE", str(cache))  # no header pack from an earlier read
    src = open_source(REPO)
    headers = src.read_headers(src.safetensors_files())
    assert all(isinstance(h, SafetensorsHeader) for h in headers.values()), headers
    return headers  # type: ignore[return-value]


def test_first_tries_go_through_libcurl_and_read_what_huggingface_hubs_client_reads(
    hub_env: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first_tries: list[str]
) -> None:
    root = _repo(tmp_path / "repo")
    hub_env.add_repo(REPO, root)
    by_curl = _read(monkeypatch, tmp_path / "c1")
    assert sorted(u.rsplit("/", 1)[1] for u in first_tries) == sorted(by_curl)  # every shard's first try, once
    assert all(len(_shard_requests(hub_env, s)) == 1 for s in by_curl)
    hub_env.reset_stats()
    first_tries.clear()
    monkeypatch.setenv(hub_headers.CURL_ENV, "0")
    by_client = _read(monkeypatch, tmp_path / "c2")
    assert first_tries == []
    assert all(len(_shard_requests(hub_env, s)) == 1 for s in by_client)
    for shard, header in by_curl.items():
        other = by_client[shard]
        assert (header.header_len, header.metadata, dict(header.tensors)) == (
            other.header_len, other.metadata, dict(other.tensors))  # fmt: skip
        with open(root / shard, "rb") as f:
            assert header.header_len == struct.unpack("<Q", f.read(8))[0]


@pytest.mark.parametrize("fault", [{"status": 503}, {"drop": True}, {"status": 429, "retry_after": 0}])
def test_a_failed_first_try_is_asked_again_through_huggingface_hubs_backoff(
    hub_env: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first_tries: list[str], fault: dict
) -> None:
    hub_env.add_repo(REPO, _repo(tmp_path / "repo"))
    shard = "model-00002-of-00003.safetensors"
    hub_env.add_fault(shard, times=1, **fault)
    started = time.monotonic()
    headers = _read(monkeypatch, tmp_path / "cache")
    assert len(headers[shard].tensors) == 30
    assert sum(u.endswith(shard) for u in first_tries) == 1  # the second request was huggingface_hub's
    assert len(_shard_requests(hub_env, shard)) == 2
    if "retry_after" in fault:  # huggingface_hub's backoff waits Retry-After + 1 s; so does the first try's hand-over
        assert time.monotonic() - started >= 1.0


def test_a_404_first_try_is_a_missing_shard_without_another_request(
    hub_env: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first_tries: list[str]
) -> None:
    hub_env.add_repo(REPO, _repo(tmp_path / "repo"))
    shard = "model-00001-of-00003.safetensors"
    hub_env.add_fault(shard, 404, error_code="EntryNotFound")
    monkeypatch.setenv("ONBOARD_CACHE", str(tmp_path / "cache"))
    src = open_source(REPO)
    headers = src.read_headers(src.safetensors_files())
    assert headers[shard].code == "missing-shard"  # type: ignore[union-attr]
    assert len(_shard_requests(hub_env, shard)) == 1
    hub_env.add_fault("model-00003", 401)
    hub_env.reset_stats()
    monkeypatch.setenv("ONBOARD_CACHE", str(tmp_path / "cache-2"))
    src = open_source(REPO)
    with pytest.raises(HubError, match="access denied"):  # as huggingface_hub's client classifies a 401
        src.read_headers(["model-00003-of-00003.safetensors"])
    assert len(_shard_requests(hub_env, "model-00003-of-00003.safetensors")) == 1


def test_a_longer_header_gets_its_rest_through_huggingface_hubs_client(
    hub_env: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first_tries: list[str]
) -> None:
    root = _repo(tmp_path / "repo", shards=1)
    shard = "model-00001-of-00001.safetensors"
    tensors = {f"model.layers.0.mlp.experts.{j}.down_proj.weight": ("BF16", [16, 8]) for j in range(30)}
    header = M.header_dict(tensors)
    header["__metadata__"] = {"format": "pt", "note": "x" * 20_000}  # 20 KB the index knows nothing about
    M.write_safetensors(root / shard, header)
    hub_env.add_repo(REPO, root)
    headers = _read(monkeypatch, tmp_path / "cache")
    assert headers[shard].metadata["note"] == "x" * 20_000
    ranges = [r[2] for r in _shard_requests(hub_env, shard)]
    assert len(ranges) == 2 and ranges[1].startswith(f"bytes={int(ranges[0].split('-')[1]) + 1}-")  # type: ignore[union-attr]
    assert len(first_tries) == 1


def test_a_client_of_the_process_keeps_every_request(
    hub_env: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first_tries: list[str]
) -> None:
    """A process that set its own huggingface_hub client (a proxy, a CA bundle) has every request go through it."""
    from huggingface_hub import set_client_factory
    from huggingface_hub.utils import _http

    hub_env.add_repo(REPO, _repo(tmp_path / "repo"))
    monkeypatch.setattr(hub_client, "_checked", False)
    set_client_factory(lambda: _http.default_client_factory())
    try:
        assert not hub_headers.first_try_by_curl()
        _read(monkeypatch, tmp_path / "cache")
        assert first_tries == []
    finally:
        set_client_factory(_http.default_client_factory)
        hub_client._checked = False


def _fetch(url: str, headers: dict[str, str], end: int) -> curl_fetch.RangeResult:
    got: list[curl_fetch.RangeResult] = []
    finished = threading.Event()

    def done(result: curl_fetch.RangeResult) -> None:
        got.append(result)
        finished.set()

    curl_fetch.fetch_range(url, headers, end, done, timeout_s=10, max_in_flight=4)
    assert finished.wait(20), "no outcome within 20 s"
    return got[0]


def test_a_redirect_to_another_host_is_followed_without_the_token(hub_server: HubServer, tmp_path: Path) -> None:
    """As huggingface_hub's client: the hub sends LFS files to its CDN, which must not see the user's token."""
    (tmp_path / "blob.bin").write_bytes(bytes(range(256)) * 8)
    sha = hub_server.add_repo("org/m", tmp_path)
    port = hub_server.url.rsplit(":", 1)[1]

    def redirect(handler: object, match: object) -> None:
        handler.send_response(302)  # type: ignore[attr-defined]
        handler.send_header("Location", f"http://localhost:{port}/org/m/resolve/{sha}/blob.bin")  # type: ignore[attr-defined]
        handler.send_header("Content-Length", "0")  # type: ignore[attr-defined]
        handler.end_headers()  # type: ignore[attr-defined]

    hub_server.add_route("GET", "/org/m/resolve/main/blob.bin", redirect)
    result = _fetch(f"{hub_server.url}/org/m/resolve/main/blob.bin", {"Authorization": "Bearer hf_secret"}, 99)
    assert (result.error, result.status, result.body) == (None, 206, (bytes(range(256)) * 8)[:100])
    assert result.headers["x-repo-commit"] == sha  # the last hop's header fields
    assert hub_server.stats.auth == ["Bearer hf_secret", None]  # 127.0.0.1 then localhost: another host


def test_a_server_ignoring_range_is_cut_at_the_range_end(hub_server: HubServer, tmp_path: Path) -> None:
    (tmp_path / "big.bin").write_bytes(b"x" * (3 << 20))
    hub_server.add_repo("org/m", tmp_path)
    hub_server.honour_range = False
    result = _fetch(f"{hub_server.url}/org/m/resolve/main/big.bin", {}, 999)
    assert (result.error, result.status, len(result.body)) == (None, 200, 1000)
    assert result.received < 2 << 20  # stopped early, not read to the end


def test_a_refused_connection_is_an_error_not_an_answer() -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = _fetch(f"http://127.0.0.1:{port}/x", {}, 10)
    assert result.error is not None and result.error[0] == curl_fetch.pycurl.E_COULDNT_CONNECT
    assert result.status == 0 and result.body == b""


@pytest.fixture
def tls_hub(tmp_path: Path) -> Iterator[tuple[HubServer, Path]]:
    """A loopback hub over HTTPS with a certificate for 127.0.0.1 signed by a CA of its own; the CA's file."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a CA and a certificate (apt install openssl checks this)")
    ca_key, ca, key, csr, cert = (tmp_path / n for n in ("ca.key", "ca.pem", "srv.key", "srv.csr", "srv.pem"))
    ext = tmp_path / "ext.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1\n")

    def run(*args: object) -> None:
        subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)

    run(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        ca_key,
        "-out",
        ca,
        "-days",
        "2",
        "-subj",
        "/CN=test CA",
    )
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=127.0.0.1")
    run("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-out", cert, "-days", "2",
        "-extfile", ext)  # fmt: skip
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "blob.bin").write_bytes(b"0123456789" * 10)
    server = HubServer(tls=context).start()
    server.add_repo("org/m", tmp_path / "files")
    try:
        yield server, ca
    finally:
        server.stop()


def test_https_trusts_what_httpx_trusts(tls_hub: tuple[HubServer, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """SSL_CERT_FILE names the CA for both clients; without it neither trusts the server (the system store does not
    hold this CA), so a first try never accepts what huggingface_hub's client would refuse."""
    import httpx2

    server, ca = tls_hub
    url = f"{server.url}/org/m/resolve/main/blob.bin"
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))
    result = _fetch(url, {}, 9)
    assert (result.error, result.status, result.body) == (None, 206, b"0123456789")
    with httpx2.Client(verify=httpx2.create_ssl_context()) as client:
        assert client.get(url, headers={"Range": "bytes=0-9"}).content == b"0123456789"
    monkeypatch.delenv("SSL_CERT_FILE")
    result = _fetch(url, {}, 9)
    assert result.error is not None and result.error[0] == curl_fetch.pycurl.E_PEER_FAILED_VERIFICATION
    with httpx2.Client(verify=httpx2.create_ssl_context()) as client, pytest.raises(httpx2.ConnectError):
        client.get(url)


def test_in_flight_transfers_stay_within_the_limit(hub_server: HubServer, tmp_path: Path) -> None:
    (tmp_path / "blob.bin").write_bytes(b"y" * 1000)
    hub_server.add_repo("org/m", tmp_path)
    hub_server.latency = 0.1
    results: list[curl_fetch.RangeResult] = []
    all_done = threading.Event()

    def done(result: curl_fetch.RangeResult) -> None:
        results.append(result)
        if len(results) == 10:
            all_done.set()

    for _ in range(10):
        curl_fetch.fetch_range(f"{hub_server.url}/org/m/resolve/main/blob.bin", {}, 99, done, timeout_s=10,
                               max_in_flight=3)  # fmt: skip
    assert all_done.wait(20)
    assert [r.status for r in results] == [206] * 10
    assert hub_server.stats.max_in_flight == 3


def test_reset_closes_the_loop_and_the_next_fetch_starts_another(hub_server: HubServer, tmp_path: Path) -> None:
    (tmp_path / "blob.bin").write_bytes(b"z" * 100)
    hub_server.add_repo("org/m", tmp_path)
    url = f"{hub_server.url}/org/m/resolve/main/blob.bin"
    assert _fetch(url, {}, 9).body == b"z" * 10
    before = curl_fetch._current
    curl_fetch.reset()
    assert curl_fetch._current is None
    assert _fetch(url, {}, 4).body == b"z" * 5
    assert curl_fetch._current is not None and curl_fetch._current is not before


def test_the_wait_before_a_failed_first_try_is_asked_again_is_huggingface_hubs() -> None:
    """As huggingface_hub's backoff: a 429's rate-limit reset or a Retry-After in seconds, plus one second; else the
    first backoff step (an HTTP-date Retry-After is not read by it either)."""
    assert hub_headers._first_wait(429, {"ratelimit": '"api";r=0;t=5'}) == 6.0
    assert hub_headers._first_wait(503, {"retry-after": "2"}) == 3.0
    assert hub_headers._first_wait(500, {}) == hub.RETRY_BASE_S
    assert hub_headers._first_wait(503, {"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == hub.RETRY_BASE_S
    assert hub_headers._first_wait(0, {}) == hub.RETRY_BASE_S  # a dropped connection


def test_a_transfer_libcurl_refuses_goes_through_huggingface_hubs_client(
    hub_env: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub_env.add_repo(REPO, _repo(tmp_path / "repo"))

    def refuse(*args: object, **kwargs: object) -> None:
        raise curl_fetch.pycurl.error(24, "no descriptor left")

    monkeypatch.setattr(curl_fetch, "fetch_range", refuse)
    headers = _read(monkeypatch, tmp_path / "cache")
    assert all(len(h.tensors) == 30 for h in headers.values())
    assert all(len(_shard_requests(hub_env, s)) == 1 for s in headers)


def test_a_transfer_given_to_a_closed_loop_ends_at_once_as_a_dropped_connection() -> None:
    """A fetch racing a reset from another thread: its outcome comes (as an error the caller retries), never hangs."""
    loop = curl_fetch._Loop()
    loop.close()
    deadline = time.monotonic() + 10
    while not loop._closed and time.monotonic() < deadline:
        time.sleep(0.01)
    got: list[curl_fetch.RangeResult] = []
    loop.submit(curl_fetch._Transfer("http://127.0.0.1:9/x", {}, 9, got.append, 5.0), 4)
    assert len(got) == 1 and got[0].error is not None and got[0].error[0] == curl_fetch.pycurl.E_RECV_ERROR
