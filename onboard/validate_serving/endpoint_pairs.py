"""Several endpoints (clusters, replicas, engine configurations): each pair judged against each other.

`validate --endpoint A --endpoint B ...` validates every endpoint against the goldens (run.validate, one result
each), then asks each for the greedy continuation of every golden prompt and compares every pair with the comparator:
position by position up to where their tokens part (after that their prefixes differ and nothing is comparable).
Two endpoints agree when their tokens part only at near-ties and their distributions are within the dtype's noise
(the goldens' tolerance: each side is one served run of the dtype, as the calibration's candidate is). The matrix
names, per pair, the first prompt and generated position where they diverge, which is where a person looks first.
"""

from __future__ import annotations

from collections.abc import Sequence
from copy import deepcopy
from dataclasses import asdict, dataclass
from itertools import combinations
from typing import Any

from onboard.checks import Check
from onboard.comparator import PositionMetrics, Tolerances, compare_rows, first_difference, judge
from onboard.validate_serving.candidates import Candidate, Generation
from onboard.validate_serving.golden import GoldenSet


@dataclass(frozen=True)
class Divergence:
    prompt: str
    generated_index: int
    """The generated token where the pair first parts (tokens) or first exceeds the tolerance (distributions)."""
    kind: str
    """tokens | distribution"""
    detail: str


@dataclass(frozen=True)
class PairResult:
    a: str
    b: str
    passed: bool
    reasons: tuple[str, ...]
    """The comparator's failed bounds over the pooled positions, then the token divergences beyond near-ties."""
    positions: int
    max_logprob_error: float
    kl_max: float
    token_divergences: int
    """Prompts whose greedy tokens part beyond a near-tie."""
    first: Divergence | None


def greedy_runs(golden: GoldenSet, candidate: Candidate, top_k: int) -> list[Generation]:
    """The endpoint's greedy continuation of every golden prompt, to the goldens' length."""
    return [candidate.generate([p.prompt_ids], len(p.generated_ids), top_k, ignore_eos=True)[0] for p in golden.prompts]


def compare_pair(
    golden: GoldenSet, a: tuple[str, Sequence[Generation]], b: tuple[str, Sequence[Generation]], tol: Tolerances
) -> PairResult:
    """Endpoint a against endpoint b on every golden prompt (a's rows stand where the goldens' would)."""
    pooled: list[PositionMetrics] = []
    parted: list[Divergence] = []
    beyond: list[Divergence] = []
    for prompt, ga, gb in zip(golden.prompts, a[1], b[1]):
        at = first_difference(ga.ids, gb.ids)
        # Rows up to and including the parting token: both sides predicted it from the same prefix.
        n = min(len(ga.steps), len(gb.steps), len(ga.ids) if at is None else at + 1)
        metrics = compare_rows(ga.steps[:n], gb.steps[:n], ga.ids[:n], prompt=prompt.name)
        pooled += metrics
        for m in metrics:
            if not (m.max_logprob_error <= tol.max_logprob_error and m.kl <= tol.kl_max):
                what = f"max logprob error {m.max_logprob_error:.3g}, KL {m.kl:.3g}"
                beyond.append(Divergence(prompt.name, m.index, "distribution", what))
                break
        # Each side may move a top-1 margin by the reference's own noise: parting within twice that is a tie.
        if at is not None and at < n and metrics[at].gap > 2 * tol.near_tie:
            what = f"{a[0]} token {ga.ids[at]}, {b[0]} token {gb.ids[at]}, gap {metrics[at].gap:.3g}"
            parted.append(Divergence(prompt.name, at, "tokens", f"{what} > near-tie {2 * tol.near_tie:.3g}"))
    verdict = judge(pooled, tol)
    reasons = verdict.reasons + ((f"{len(parted)} prompt(s) part beyond a near-tie",) if parted else ())
    order = {p.name: i for i, p in enumerate(golden.prompts)}
    first = min(parted + beyond, key=lambda d: (order[d.prompt], d.generated_index), default=None)
    if reasons and first is None:  # a pooled bound failed (mean KL, tail) with no single position beyond: the worst
        worst = max(pooled, key=lambda m: m.kl)
        first = Divergence(worst.prompt, worst.index, "distribution", f"largest KL {worst.kl:.3g}")
    return PairResult(
        a[0],
        b[0],
        not reasons,
        reasons,
        verdict.positions,
        verdict.max_logprob_error,
        verdict.kl_max,
        len(parted),
        first if reasons else None,
    )


def endpoints_agree(golden: GoldenSet, runs: dict[str, Sequence[Generation]], tol: Tolerances) -> Check:
    """The required check over every pair of endpoints; its data is the matrix (report.pair_matrix renders it)."""
    pairs = [compare_pair(golden, (a, runs[a]), (b, runs[b]), tol) for a, b in combinations(runs, 2)]
    data: dict[str, Any] = {"endpoints": list(runs), "pairs": [asdict(p) for p in pairs]}
    bad = [p for p in pairs if not p.passed]
    if not bad:
        detail = (
            f"{len(runs)} endpoints, {len(pairs)} pair(s): every pair within the {tol.dtype} noise over "
            f"{sum(p.positions for p in pairs)} positions, greedy tokens parting only at near-ties"
        )
        return Check("endpoints_agree", True, True, detail, data=data)
    parts = []
    for p in bad:
        first = p.first
        where = f"; first at {first.prompt} generated token {first.generated_index} ({first.kind}: {first.detail})"
        parts.append(f"{p.a} vs {p.b}: {'; '.join(p.reasons)}{where if first else ''}")
    return Check(
        "endpoints_agree", False, True, f"{len(bad)} of {len(pairs)} pair(s) diverge: " + " | ".join(parts), data=data
    )


def combine(labelled: Sequence[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """The fleet's result: the first endpoint's result with each check failed where any endpoint failed it (its
    detail names the endpoints that did), and `endpoints` listing each one's own verdict."""
    result = deepcopy(labelled[0][1])
    first_label = labelled[0][0]
    for check in result["checks"]:
        bad = [
            (label, c)
            for label, r in labelled[1:]
            for c in r["checks"]
            if c["name"] == check["name"] and c.get("required") and not c["passed"]
        ]
        if not bad:
            continue
        # Failed on another endpoint: failed for the fleet, even where the first endpoint skipped it.
        own = [f"{first_label}: {check['detail']}"] if not check["passed"] or check.get("skipped") else []
        detail = " | ".join(own + [f"{label}: {c['detail']}" for label, c in bad])
        check.update(passed=False, required=True, skipped=False, not_applicable=False, detail=detail)
    result["endpoints"] = [
        {"endpoint": label, "passed": r["passed"], "failed": r["failed"], "candidate": r["candidate"]}
        for label, r in labelled
    ]
    return result
