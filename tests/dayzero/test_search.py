"""Resolve by experiment what config cannot say (onboard/generate_adapter/search.py, issue 41), on families
re-shipped as repository code under a new model_type: composition knows nothing of them, so a rotary layout only
their code shows is found by the search and written into the adapter with its evidence; a defect only the
repository's code has is localised and never turned into a pass."""

from __future__ import annotations

import shutil

import pytest

from onboard.generate_adapter import generate
from onboard.generate_adapter.search import BUDGET_FACTOR, MAX_TRIALS
from onboard.reference import RemoteCodePolicy

TRUSTED = RemoteCodePolicy(trust_remote_code=True)


def _within_budget(search: dict) -> None:
    assert 1 <= search["trial_count"] <= MAX_TRIALS and search["trial_count"] == len(search["trials"])
    assert search["seconds"] <= BUDGET_FACTOR * search["parity_seconds"], search["outcome"]


@pytest.mark.parametrize("family", ["helium", "glm"])
def test_interleaved_rotary_is_found_and_written_into_the_adapter(dayzero, in_process_sandbox, tmp_path, family):
    result = generate(dayzero(family).path, tmp_path / "out", parity=True, policy=TRUSTED)
    parity = result.parity
    assert parity["status"] == "passed", parity["detail"]
    search = parity["search"]
    assert search["started_at"] == "layer 0 attention" and search["adopted"] == ["rotary interleaved"]
    _within_budget(search)
    assert "search: adopted rotary interleaved after" in parity["detail"]
    adapter = " ".join((tmp_path / "out" / "adapters" / f"dayzero_{family}.py").read_text().split())
    assert "resolved by experiment (onboard's search): rotary interleaved" in adapter
    assert "rope_interleaved=True," in adapter


def test_a_seeded_layer_1_defect_is_localised_and_never_searched_into_a_pass(dayzero, in_process_sandbox, tmp_path):
    from tests.dayzero.builder import LAYER_1_ATTENTION_X105, seed_defect

    seeded = tmp_path / "seeded"
    shutil.copytree(dayzero("llama").path, seeded, symlinks=True)
    seed_defect(seeded, *LAYER_1_ATTENTION_X105)
    parity = generate(seeded, tmp_path / "out", parity=True, policy=TRUSTED).parity
    assert parity["status"] == "failed" and parity["passed"] is False
    assert (parity["first_divergence"]["layer"], parity["first_divergence"]["module"]) == (1, "attention")
    search = parity["search"]
    assert search["adopted"] == [] and search["outcome"].startswith("no alternative passed")
    assert not any(t.get("verdict") == "passed" for t in search["trials"])
    _within_budget(search)
    assert "resolved by experiment" not in (tmp_path / "out" / "adapters" / "dayzero_llama.py").read_text()
