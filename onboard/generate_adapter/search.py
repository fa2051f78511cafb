"""Resolve by experiment what config and tensors cannot say. When parity fails and the first divergence names a
module, the known alternatives for that module (search_alternatives.ALTERNATIVES, as data) are tried one at a time:
each trial adapter is judged by the same layer-level comparison against the reference's captured activations
(divergence.locate, the capture made once), and a trial that removes every divergence by the whole-model verdict
(parity.check_parity, the one comparator). Greedy: a trial that moves the first divergence later is kept and the
search goes on from there. Nothing is adopted unless the full parity verdict then passes; a budget bounds it
(MAX_TRIALS trials, BUDGET_FACTOR x the first parity run's time: a trial starts only if, as long as the longest so
far, it would end within it).

The adopted alternatives are written into the adapter (its docstring names them), and the evidence (every trial,
its divergence and verdict, the time against one parity run) into the parity result's `search`.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from onboard.generate_adapter.adapter_spec import AdapterSpec
from onboard.generate_adapter.compose_rules import AdapterPlan
from onboard.generate_adapter.divergence import locate, projection_names, summary
from onboard.generate_adapter.divergence_capture import key_of
from onboard.generate_adapter.divergence_stages import reference_at
from onboard.generate_adapter.parity import check_parity, load_adapter, parity_config, prompts
from onboard.generate_adapter.parity_power import LOW_POWER
from onboard.generate_adapter.search_alternatives import ALTERNATIVES, Alternative, apply, rotary_alternatives

MAX_TRIALS = 20
BUDGET_FACTOR = 2.0
"""The search may take at most this many times the first parity run (which ran the reference)."""
PASSING = ("passed", LOW_POWER)


def _where(first: Mapping[str, Any] | None) -> str:
    if not first:
        return "none"
    return f"layer {first['layer']} {first['module']}" if first.get("layer") is not None else str(first["module"])


class Search:
    """One search on one checkpoint: the reference's capture and runs made once (`memo`), trials rendered into a
    scratch folder."""

    def __init__(self, plan: AdapterPlan, checkpoint: Path, memo: dict[str, Any], policy: Any, rerun: str | None):
        self.plan, self.checkpoint, self.memo, self.policy, self.rerun = plan, checkpoint, memo, policy, rerun
        self.input_ids = prompts(parity_config(checkpoint))[-1]
        self.scratch = Path(tempfile.mkdtemp(prefix="onboard-search-"))
        self.trials: list[dict[str, Any]] = []
        self.order: list[str] = []

    def render(self, spec: AdapterSpec, adopted: list[str]) -> str:
        from onboard.generate_adapter.adapter_source import adapter_source

        note = f"; resolved by experiment (onboard's search): {', '.join(adopted)}" if adopted else ""
        spec = dataclasses.replace(spec, summary=spec.summary + note)
        return adapter_source(dataclasses.replace(self.plan, spec=spec))

    def locate(self, spec: AdapterSpec, name: str) -> tuple[Path, dict[str, Any]]:
        """Render, load and compare one trial against the reference's capture: (its file, locate's result)."""
        path = self.scratch / f"trial_{len(self.trials)}.py"
        path.write_text(self.render(spec, [name]), encoding="utf-8")
        try:
            adapter = load_adapter(path).Model
            model = adapter.from_pretrained(self.checkpoint, dtype=torch.float32, trust_remote_code=False)
            names = projection_names(model)
            ref = reference_at(
                self.checkpoint,
                self.input_ids,
                self.policy,
                self.memo.get("runs", (0, None))[1],
                self.rerun,
                self.memo.setdefault("captures", {}),
            )("float32", names)
            self.order = list(ref)
            return path, locate(model, ref, self.input_ids, "float32")
        finally:
            sys.modules.pop(f"_onboard_adapter_{path.stem}", None)

    def position(self, first: Mapping[str, Any] | None) -> float:
        """Where a first divergence is in the reference's execution order (inf: none)."""
        if not first:
            return math.inf
        key = key_of(first.get("layer"), first["module"])
        return float(self.order.index(key)) if key in self.order else -1.0


def parity_with_search(
    plan: AdapterPlan,
    adapter_file: str | Path,
    checkpoint: str | Path,
    dtype: str = "float32",
    policy: Any = None,
    rerun: str | None = None,
) -> dict[str, Any]:
    """check_parity, and when it fails with a located first divergence, the search. An adopted alternative is
    written into `adapter_file`; the result is then the adopted adapter's parity, with `search` (the evidence)."""
    memo: dict[str, Any] = {}
    start = time.perf_counter()
    result = check_parity(adapter_file, checkpoint, dtype, policy=policy, rerun=rerun, memo=memo)
    parity_s = time.perf_counter() - start
    if result["status"] != "failed" or not result.get("first_divergence"):
        return result
    found, evidence = search(plan, Path(checkpoint), result, memo, policy, rerun, dtype, parity_s)
    if found is None:
        result["detail"] += f"; search: {evidence['outcome']}"
        return result | {"search": evidence}
    from onboard.fsutil import atomic_write

    adopted, text = found
    atomic_write(Path(adapter_file), text)
    final = check_parity(adapter_file, checkpoint, dtype, policy=policy, rerun=rerun, memo=memo)
    final["detail"] += f"; search: {evidence['outcome']}"
    return final | {"search": evidence}


def search(
    plan: AdapterPlan,
    checkpoint: Path,
    failed: Mapping[str, Any],
    memo: dict[str, Any],
    policy: Any,
    rerun: str | None,
    dtype: str,
    parity_s: float,
) -> tuple[tuple[list[str], str] | None, dict[str, Any]]:
    """((adopted names, the adapter's text) or None, evidence). `failed`: the failed parity result whose first
    divergence starts the search; `parity_s`: its time, which bounds the search's."""
    start = time.perf_counter()
    deadline = start + BUDGET_FACTOR * parity_s
    s = Search(plan, checkpoint, memo, policy, rerun)
    first: Mapping[str, Any] | None = failed["first_divergence"]
    spec, adopted, found = plan.spec, [], None
    table = ALTERNATIVES + rotary_alternatives(checkpoint, _head_dim(checkpoint))
    tried: set[str] = set()
    base = s.position(first)
    longest = 0.0  # the longest trial so far: one is not started unless it would end within the budget

    def over_budget() -> bool:
        return len(s.trials) >= MAX_TRIALS or time.perf_counter() + longest > deadline

    while found is None and first and not over_budget():
        moved = False
        for alt in _for_module(table, first["module"], tried):
            trial_spec = apply(spec, alt)
            if trial_spec == spec:
                continue
            if over_budget():
                break
            tried.add(alt.name)
            began = time.perf_counter()
            row, located = _trial(s, trial_spec, alt, adopted, dtype)
            longest = max(longest, time.perf_counter() - began)
            if located is None:
                continue
            if base < 0:  # the failed run's divergence, placed once the reference's order is known
                base = s.position(first)
            if row.get("verdict") in PASSING:
                found = (adopted + [alt.name], s.render(trial_spec, adopted + [alt.name]))
                break
            if s.position(located["first_divergence"]) > base and located["first_divergence"]:
                spec, first, moved = trial_spec, located["first_divergence"], True  # a step: keep it, go on from there
                adopted.append(alt.name)
                base = s.position(first)
                break
        if not moved:
            break
    seconds = time.perf_counter() - start
    names = found[0] if found else []
    outcome = (
        f"adopted {', '.join(names)} after {len(s.trials)} trial(s)"
        if found
        else f"no alternative passed ({len(s.trials)} trial(s): {', '.join(t['alternative'] for t in s.trials) or 'none'})"
    )
    if not found and adopted:  # steps moved the divergence on, nothing passed there: where the search ended
        outcome += f"; with {', '.join(adopted)} the first divergence moves to {_where(first)}, where none passed"
    evidence = {
        "started_at": _where(failed["first_divergence"]),
        "ended_at": _where(first) if not found else None,
        "steps": [] if found else list(adopted),
        "trials": s.trials,
        "adopted": names,
        "outcome": outcome + f"; {seconds:.1f} s against {parity_s:.1f} s for one parity run",
        "trial_count": len(s.trials),
        "seconds": round(seconds, 3),
        "parity_seconds": round(parity_s, 3),
        "budget": {"trials": MAX_TRIALS, "seconds": round(BUDGET_FACTOR * parity_s, 3)},
    }
    return found, evidence


def _for_module(table: tuple[Alternative, ...], module: str, tried: set[str]) -> list[Alternative]:
    return [a for a in table if module in a.modules and a.name not in tried]


def _trial(
    s: Search, spec: AdapterSpec, alt: Alternative, adopted: list[str], dtype: str
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """One trial, recorded in `s.trials`: its first divergence, and the whole-model verdict when it has none."""
    row: dict[str, Any] = {"alternative": alt.name, "with": list(adopted)}
    s.trials.append(row)
    try:
        path, located = s.locate(spec, alt.name)
    except Exception as exc:  # noqa: BLE001 - a trial that cannot run is that trial's result
        row["error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        return row, None
    first = located["first_divergence"]
    row["first_divergence"] = _where(first)
    row["rel"] = first["rel"] if first else None
    row["divergence"] = summary(located)
    if first is None:
        verdict = check_parity(path, s.checkpoint, dtype, policy=s.policy, rerun=s.rerun, memo=s.memo)
        row["verdict"] = verdict["status"]
        row["verdict_detail"] = verdict["detail"][:300]
    return row, located


def _head_dim(checkpoint: Path) -> int | None:
    config = parity_config(checkpoint)
    heads = config.get("num_attention_heads")
    return config.get("head_dim") or (config["hidden_size"] // heads if heads and config.get("hidden_size") else None)
