# ruff: noqa: F811  (pytest fixtures imported from tests.hubserver are used as parameters)
"""The HTTP client onboard installs in huggingface_hub (hub_client.install_client): huggingface_hub's own client but for
one connection pool per worker thread, so its backoff still retries every request."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from onboard.inspect_checkpoint import hub, hub_client
from tests.hubserver import hub_env, hub_server  # noqa: F401  (fixtures)


@pytest.fixture
def fresh_install(monkeypatch: pytest.MonkeyPatch):
    """huggingface_hub's default factory and onboard's install not yet done, as in a new process; restored after."""
    from huggingface_hub import set_client_factory
    from huggingface_hub.utils import _http

    set_client_factory(_http.default_client_factory)
    monkeypatch.setattr(hub_client, "_checked", False)
    yield _http
    set_client_factory(_http.default_client_factory)


def test_client_is_huggingface_hubs_default_but_for_the_transport() -> None:
    from huggingface_hub.utils._http import default_client_factory

    ours, theirs = hub_client.client_factory(), default_client_factory()
    try:
        assert ours.event_hooks == theirs.event_hooks  # offline switch, request ids, download counter
        assert (ours.follow_redirects, ours.timeout) == (theirs.follow_redirects, theirs.timeout)
        assert type(ours._transport).__name__ == "ThreadPools"
    finally:
        ours.close()
        theirs.close()


def test_each_thread_reuses_its_own_connection(hub_env, tmp_path: Path) -> None:
    # hub_env, not the bare server: huggingface_hub's request hook refuses every request while its HF_HUB_OFFLINE
    # constant is set (an earlier test of the suite may leave it so)
    (tmp_path / "config.json").write_text('{"model_type": "llama"}')
    hub_env.add_repo("org/m", tmp_path)
    client = hub_client.client_factory()
    url = f"{hub_env.url}/org/m/resolve/main/config.json"
    bodies: list[bytes] = []

    def three_gets() -> None:
        for _ in range(3):
            bodies.append(client.get(url).content)

    try:
        threads = [threading.Thread(target=three_gets) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        pools = client._transport._pools
        assert bodies == [b'{"model_type": "llama"}'] * 12
        assert len(pools) == 4  # one pool per thread, not one shared by all
        assert [len(p._pool.connections) for p in pools.values()] == [1, 1, 1, 1]  # 3 requests, one connection
    finally:
        client.close()


def test_requests_go_through_the_installed_client_and_are_retried(hub_env, tmp_path: Path, fresh_install) -> None:
    (tmp_path / "config.json").write_text("{}")
    sha = hub_env.add_repo("org/m", tmp_path)
    hub_env.add_fault("config.json", 503, times=1)
    counter = hub.ByteCounter()
    path = hub.fetch_file("org/m", sha, "config.json", 2, counter)
    assert path is not None and path.read_text() == "{}"
    assert hub_env.stats.count("GET", "config.json") == 2  # the 503 was retried by huggingface_hub's backoff
    assert fresh_install._GLOBAL_CLIENT_FACTORY is hub_client.client_factory
    assert type(fresh_install.get_session()._transport).__name__ == "ThreadPools"


def test_a_factory_set_by_the_process_is_left_alone(fresh_install) -> None:
    from huggingface_hub import set_client_factory

    def own_factory():  # e.g. a company proxy or CA bundle
        return fresh_install.default_client_factory()

    set_client_factory(own_factory)
    hub_client.install_client()
    assert fresh_install._GLOBAL_CLIENT_FACTORY is own_factory


def test_proxy_variables_keep_huggingface_hubs_client(fresh_install, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")  # honoured by httpx only without a custom transport
    hub_client.install_client()
    assert fresh_install._GLOBAL_CLIENT_FACTORY is fresh_install.default_client_factory


def test_start_workers_starts_every_worker_and_the_pool_still_runs_tasks() -> None:
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=12, thread_name_prefix="test-start")
    try:
        hub_client.start_workers(pool, 12).join(timeout=10)
        assert len(pool._threads) == 12  # all started, not one reused for every placeholder
        assert sorted(pool.map(lambda x: x * x, range(20))) == [x * x for x in range(20)]
    finally:
        pool.shutdown(wait=True)


def test_start_workers_on_a_closed_pool_starts_nothing() -> None:
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=4)
    pool.shutdown(wait=True)
    hub_client.start_workers(pool, 4).join(timeout=10)
    assert len(pool._threads) == 0


def test_start_workers_takes_the_count_from_a_function_called_on_its_thread() -> None:
    from concurrent.futures import ThreadPoolExecutor

    callers: list[str] = []

    def count() -> int:
        callers.append(threading.current_thread().name)
        return 5

    pool = ThreadPoolExecutor(max_workers=12, thread_name_prefix="test-start")
    try:
        hub_client.start_workers(pool, count).join(timeout=10)
        assert callers == ["onboard-hub-start"] and len(pool._threads) == 5
    finally:
        pool.shutdown(wait=True)
