"""Families re-shipped as repository code under a new model_type (tests/dayzero/builder.py FAMILIES: interleaved
rotary, QK-norm, sandwich norms, MoE routing variants, parallel blocks, partial rotary): composition knows nothing of
them, so each reaches adapter parity from its profile and, where config and tensors cannot say, through the search
(issue 41: at least 80% of them). A code-only defect behind the composition's own gaps is still localised."""

from __future__ import annotations

import shutil

from onboard.generate_adapter import generate
from onboard.generate_adapter.search import BUDGET_FACTOR, MAX_TRIALS
from onboard.reference import RemoteCodePolicy
from tests.dayzero.builder import FAMILIES, LAYER_1_ATTENTION_X105, seed_defect

TRUSTED = RemoteCodePolicy(trust_remote_code=True)
SHORT_OF_PARITY: dict[str, str] = {}
"""The families that stop before parity, and the stub that stops them: a fix or a regression shows as a difference.
(cohere stopped at norm_layout until one norm per layer was composed as the parallel block, parity confirming.)"""


def test_at_least_80_percent_reach_parity_each_adoption_named(dayzero, in_process_sandbox, tmp_path) -> None:
    reached, short, searched = [], {}, {}
    for family in FAMILIES:
        result = generate(dayzero(family).path, tmp_path / family, parity=True, policy=TRUSTED)
        parity = result.parity
        if parity is None:  # a stub left the adapter not runnable
            short[family] = sorted(stub["op"] for stub in result.stubs)
            continue
        assert parity["status"] in ("passed", "failed"), (family, parity["detail"])  # float32: the probes are caught
        if parity["status"] == "passed":
            reached.append(family)
        search = parity.get("search")
        if search:
            searched[family] = search
            assert 1 <= search["trial_count"] <= MAX_TRIALS, search["outcome"]
            assert search["seconds"] <= BUDGET_FACTOR * search["parity_seconds"], search["outcome"]
            if search["adopted"]:
                assert f"search: adopted {', '.join(search['adopted'])}" in parity["detail"]
                adapter = (tmp_path / family / "adapters" / f"dayzero_{family}.py").read_text()
                assert "resolved by experiment (onboard's search)" in " ".join(adapter.split())
    for family, search in searched.items():
        print(f"{family}: {search['outcome']}")
    print(f"reached parity: {len(reached)} of {len(FAMILIES)}; short: {short}")
    assert len(reached) >= 0.8 * len(FAMILIES), (reached, short)
    assert set(FAMILIES) - set(reached) == set(SHORT_OF_PARITY), (reached, short)
    assert all(SHORT_OF_PARITY[f] in short[f] for f in SHORT_OF_PARITY), short
    assert {f for f, s in searched.items() if s["adopted"]} >= {"helium", "glm", "gemma2", "cohere"}  # by experiment


def test_a_code_only_defect_behind_composition_gaps_is_still_localised(dayzero, in_process_sandbox, tmp_path) -> None:
    """Gemma-2 re-shipped: composition misses its embedding scale and (1+w) norms (code-only facts), so parity first
    diverges at the embedding; a layer 1 attention x1.05 seeded in its code is behind them. The search takes those
    steps, ends at layer 1 attention where no alternative passes, and says so; nothing is adopted."""
    seeded = tmp_path / "seeded"
    shutil.copytree(dayzero("gemma2").path, seeded, symlinks=True)
    seed_defect(seeded, *LAYER_1_ATTENTION_X105)
    parity = generate(seeded, tmp_path / "out", parity=True, policy=TRUSTED).parity
    search = parity["search"]
    print(parity["detail"])
    assert parity["status"] == "failed" and search["adopted"] == []
    assert search["ended_at"] == "layer 1 attention", search["outcome"]
    assert "the first divergence moves to layer 1 attention, where none passed" in parity["detail"]
    assert not any(t.get("verdict") == "passed" for t in search["trials"])
