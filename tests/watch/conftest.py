"""Fixtures for the watch tests: an in-process webhook service on loopback and a hub with a model listing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from onboard.watch.queue import Queue
from onboard.watch.webhook import WebhookConfig, WebhookServer
from tests.hubserver import HubServer
from tests.watch.helpers import SECRET
from tests.watch.hub_listing import ModelListing


@pytest.fixture
def queue_db(tmp_path: Path) -> Path:
    return tmp_path / "queue.sqlite"


@pytest.fixture
def service(queue_db: Path) -> Iterator[WebhookServer]:
    """A started webhook service on loopback storing into queue_db (no workers): `.url`, `.queue`, `.wake`."""
    with Queue(queue_db) as queue, WebhookServer(queue, WebhookConfig(SECRET.encode()), port=0) as server:
        yield server


@pytest.fixture
def listing_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[HubServer, ModelListing]]:
    """A loopback hub serving /api/models?author=… (repos are added per test with `add_repo`)."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # read by huggingface_hub at import time
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    with HubServer() as server:
        yield server, ModelListing(server)
