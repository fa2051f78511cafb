"""The acceptance's modeling-code-only defect: layer 1's attention output x1.05 seeded in the repository's own code
(a day-zero fixture, tests/dayzero/builder.py). Parity against that code fails and the bisect, whose hooks run
where the code runs (the sandbox worker), names layer 1 / attention."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest

from onboard.generate_adapter.parity import check_parity
from onboard.generate_adapter.regenerate import ADAPTERS_DIR
from onboard.reference import RemoteCodePolicy

TRUST = RemoteCodePolicy(trust_remote_code=True)


@pytest.fixture(scope="module")
def seeded_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.dayzero.builder import LAYER_1_ATTENTION_X105, build_dayzero, seed_defect

    root = tmp_path_factory.mktemp("divergence-dayzero")
    path = build_dayzero("llama", root / "dayzero_llama", canary=root / "llama.canary")
    return seed_defect(path, *LAYER_1_ATTENTION_X105)


def _assert_layer_1_attention(result: dict[str, Any]) -> None:
    assert result["passed"] is False and result["status"] == "failed"
    first = result["first_divergence"]
    assert (first["layer"], first["module"]) == (1, "attention"), result["divergence"]
    assert first["likely_cause"][0].startswith("ratio ≈ constant (adapter/reference = 0.952")


def _in_process_sandbox(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """Our side of the sandbox contract, with the worker's function called in this process; the targets called."""
    from onboard import reference

    monkeypatch.setenv("ONBOARD_DAYZERO_CANARY", str(tmp_path / "in-process.canary"))
    monkeypatch.setenv("ONBOARD_SANDBOX_WORKER", "1")  # what the real worker sets
    targets: list[str] = []

    def run(target: str, kwargs: dict[str, Any], checkpoint: Path, policy: Any, wall_s: float | None = None) -> Any:
        targets.append(target)
        module, name = target.split(":")
        return getattr(importlib.import_module(module), name)(**kwargs)

    monkeypatch.setattr(reference, "run_in_sandbox", run)
    return targets


def test_in_process_stand_in(seeded_llama, monkeypatch, tmp_path) -> None:
    targets = _in_process_sandbox(monkeypatch, tmp_path)
    _assert_layer_1_attention(check_parity(ADAPTERS_DIR / "llama.py", seeded_llama, policy=TRUST))
    assert "onboard.generate_adapter.divergence_stages:capture_in_worker" in targets


def test_validate_bisect_runs_repository_code_only_with_the_flag(seeded_llama, monkeypatch, tmp_path) -> None:
    from onboard.generate_adapter.divergence_stages import candidate_divergence
    from onboard.generate_adapter.parity import load_adapter

    model = load_adapter(ADAPTERS_DIR / "llama.py").Model.from_pretrained(seeded_llama)
    sequence = list(range(100, 140))
    refused = candidate_divergence(model, seeded_llama, sequence, "float32")
    assert refused["first_divergence"] is None and refused["divergence"].startswith("not located: no reference")
    assert f"rerun with: onboard validate {seeded_llama} --trust-remote-code" in refused["divergence"]
    _in_process_sandbox(monkeypatch, tmp_path)
    located = candidate_divergence(model, seeded_llama, sequence, "float32", TRUST)
    first = located["first_divergence"]
    assert (first["layer"], first["module"]) == (1, "attention"), located["divergence"]


@pytest.mark.slow  # two sandbox workers (parity's logits, the bisect's capture): ~30 s each on a busy 2-core box
@pytest.mark.needs("bubblewrap")
def test_real_sandbox(seeded_llama) -> None:
    _assert_layer_1_attention(check_parity(ADAPTERS_DIR / "llama.py", seeded_llama, policy=TRUST))


def test_no_trust_no_bisect(seeded_llama) -> None:
    """Without --trust-remote-code nothing of the repository runs: parity is unverified, no bisect is attempted."""
    result = check_parity(ADAPTERS_DIR / "llama.py", seeded_llama)
    assert result["status"] == "unverified" and "first_divergence" not in result
