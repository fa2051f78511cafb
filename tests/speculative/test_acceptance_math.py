"""The acceptance and speedup arithmetic on hand-worked cases (no model)."""

from __future__ import annotations

import pytest

from onboard.speculative.acceptance import (
    Windows,
    by_position,
    describe_k,
    greedy_table,
    model_speedup,
    recommended_k,
    simulate,
)
from onboard.speculative.drafts import ngram_proposals


def test_simulate_follows_the_decode_loop() -> None:
    # 6 tokens; runs from each start. k=2: t=0 accepts 2 (t=3), t=3 accepts min(1, 2) (t=5), t=5: room 0 -> 1 step.
    w = Windows(runs=(3, 0, 0, 1, 2, 0), alpha=None)
    assert simulate(w, 2) == (3, 3)
    assert simulate(w, 1) == (4, 2)  # t=0:+1 (t=2), t=2:0 (t=3), t=3:+1 (t=5), t=5 -> 4 steps, 2 accepted
    assert simulate(w, 8) == (2, 4)  # t=0: 3 (t=4), t=4: min(2, room 1) (t=6)
    table = greedy_table([w], [1, 2])
    assert table[1] == {"k": 2, "steps": 3, "accepted": 3, "tokens": 6, "mean_accepted": 1.0, "tokens_per_step": 2.0}


def test_by_position_is_conditional_on_reaching_the_position() -> None:
    w = Windows(runs=(2, 1, 0, 0, 0), alpha=None)
    first, second = by_position([w], greedy=True)[:2]
    assert (first["windows"], first["accepted"], first["rate"]) == (4, 2, 0.5)  # starts 0..3 have room for 1
    assert (second["windows"], second["reached"], second["accepted"]) == (3, 2, 1)  # starts 0..2; reached: runs>=1


def test_ngram_proposes_what_followed_the_latest_match() -> None:
    seq = [5, 6, 7, 8, 9, 5, 6, 7, 1]
    proposals = ngram_proposals(seq, prompt_len=7)  # starts after 7 and 8 tokens
    assert proposals[0] == [7, 8, 9, 5, 6]  # context ...9 5 6: '9 5 6' unseen, '5 6' seen at 0: what followed it
    assert proposals[1] == [8, 9, 5, 6, 7]  # context ...5 6 7: seen at 0
    assert ngram_proposals([1, 2, 3], prompt_len=2) == [[]]  # nothing seen twice: no proposal


def test_speedup_formula_and_recommendation() -> None:
    assert model_speedup(0.0, 4, 0.0) == 1.0
    assert model_speedup(1.0, 3, 0.1) == pytest.approx(4 / 1.3)
    assert model_speedup(0.8, 4, 0.05) == pytest.approx((1 - 0.8**5) / (0.2 * 1.2))
    rows = [{"k": 1, "measured": 1.2}, {"k": 2, "measured": 1.4}, {"k": 3, "measured": 1.4}]
    assert recommended_k(rows) == 2
    assert recommended_k([{"k": 1, "measured": 0.9}]) is None
    assert describe_k(2) == "2" and describe_k(None) == "none (no k is faster)"  # not "None" in the checklist


def test_a_window_longer_than_every_trajectory_is_unmeasured_not_zero() -> None:
    from onboard.speculative.acceptance import sampled_table, speedup_rows

    w = Windows(runs=(1, 0, 0), alpha=((0.5,) + (0.0,) * 7,) * 3)  # 3 tokens: room for windows of 1 and 2 only
    rows = sampled_table([w], [1, 2, 3])
    assert [r["windows"] for r in rows] == [2, 1, 0]
    assert rows[0]["mean_accepted"] == pytest.approx(0.5) and rows[2]["mean_accepted"] is None
    speed = speedup_rows(0.5, {r["k"]: r["tokens_per_step"] for r in rows}, 0.0)
    assert speed[2]["measured"] is None and recommended_k(speed) == 1
