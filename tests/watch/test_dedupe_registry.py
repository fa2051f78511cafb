"""`registry_check`: the watch service's question to the promotion registry (has this revision been promoted?).

test_worker.py covers the empty registry (never created by asking); these add a real promotion record, so a revision
that was promoted is skipped and its neighbours are not (same model at another revision, another model at the same
revision, the model's slug), and the registry asked is the one named, not the one in the working folder.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from onboard.promote.record import PromotionRecord
from onboard.promote.registry import Registry
from onboard.watch.types import never_promoted, registry_check
from tests.watch.helpers import sha_for

SHA = sha_for("org/model")


def _record(model: str, revision: str) -> PromotionRecord:
    return PromotionRecord(
        model=model, slug=model.replace("/", "__"), revision=revision, promoted_by="tester",
        promoted_at="2026-12-03T12:00:00Z", attempt="a1", source="hub", files=(), profile_sha256=None,
        tokenizer_sha256=None, golden_sha256=None, golden_dir=None, checks=(), checklist={}, signoffs=(),
        versions={}, hardware={},
    )  # fmt: skip


@pytest.fixture
def registry(tmp_path: Path) -> Path:
    path = tmp_path / "promoted" / "registry.sqlite3"
    Registry(path).add(_record("org/model", SHA), expect_latest=None)
    return path


def test_a_promoted_revision_is_reported_and_its_neighbours_are_not(registry: Path) -> None:
    check = registry_check(registry)
    assert check("org/model", SHA) is True
    assert check("org__model", SHA) is True  # the slug names the same model
    assert check("org/model", sha_for("org/model", 1)) is False
    assert check("org/other", SHA) is False


def test_the_named_registry_is_asked_not_the_working_folders(
    registry: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    monkeypatch.chdir(workdir)  # the default registry (./onboarding/registry.sqlite3) does not exist here
    monkeypatch.delenv("ONBOARD_REGISTRY", raising=False)
    assert registry_check(registry)("org/model", SHA) is True
    assert registry_check()("org/model", SHA) is False
    assert not (workdir / "onboarding").exists()


def test_without_a_registry_nothing_is_promoted() -> None:
    assert never_promoted("org/model", SHA) is False
