"""`onboard quantize-plan`: sweep, choose, then measure the whole plan and every uniform format.

The reference is the checkpoint run in process in the served dtype (the generated adapter, else transformers with
trust_remote_code=False). A plan's predicted KL sums its units' KLs alone; its measured KL is one forward with every
unit quantized, and a plan measured over its budget is re-chosen, then reported as such (exit 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from onboard.errors import InputError
from onboard.quantize import emit, ggml_native
from onboard.quantize.apply import QuantizedWeights, quantized
from onboard.quantize.formats import BF16, CANDIDATES, FORMATS, usable
from onboard.quantize.forward import Runner, Score
from onboard.quantize.search import (
    MEASUREMENTS,
    Option,
    Refined,
    fewest_bytes,
    fewest_bytes_within,
    least_kl,
    least_kl_within,
)
from onboard.quantize.sensitivity import Sensitivity, calibrate, matmul_modules, sweep, unit_modules
from onboard.quantize.units import Unit, find_units

MAX_SEQUENCE_TOKENS = 1024
MAX_ROUNDS = 3


@dataclass(frozen=True)
class Request:
    source: str
    budget_kl: float | None = None
    target_bytes: int | None = None
    golden: Path | None = None
    formats: tuple[str, ...] = CANDIDATES
    dtype: str = "bfloat16"
    out: Path | None = None
    revision: str | None = None
    max_tokens: int = MAX_SEQUENCE_TOKENS
    """Prompts (with their continuations) are cut to their first `max_tokens` tokens."""

    def __post_init__(self) -> None:
        if (self.budget_kl is None) == (self.target_bytes is None):
            raise InputError("give exactly one of --budget-kl and --target-bytes")


@dataclass
class Outcome:
    summary: dict[str, Any]
    """The --json object: budget_kl, predicted_kl, measured_kl, bytes, bf16_bytes, uniform_best, units."""
    detail: dict[str, Any]
    """quantize-plan.json: the summary plus the sweep, every uniform format, rounds, engine files and notes."""
    met: bool
    """The plan meets its budget or fits its byte target."""
    files: list[Path] = field(default_factory=list)


@dataclass
class Swept:
    """A checkpoint loaded, its reference recorded and every unit swept: plans for any budget or size come from it."""

    request: Request
    folder: Path
    model: Any
    runtime: str
    runner: Runner
    units: list[Unit]
    kept_bytes: float
    """The tensors no engine quantizes (norms, biases, routers), at 2 bytes each."""
    results: list[Sensitivity]
    seconds: float
    prompts_from: str
    weights: QuantizedWeights
    uniform_rows: list[dict[str, Any]] | None = None
    calibrated: list[dict[str, float]] | None = None
    """Per unit, format -> KL alone with the finest predicted format measured too (sensitivity.calibrate)."""
    left_out: dict[str, str] = field(default_factory=dict)
    """Requested formats this process cannot round as the engine does, and why (formats.usable)."""

    @property
    def bf16_bytes(self) -> float:
        return sum(u.elements for u in self.units) * 2.0 + self.kept_bytes

    def measure(self, formats: list[str]) -> Score:
        """KL and top-1 of the model with unit i in formats[i], all at once (one forward over the suite)."""
        assignment = {r.unit: FORMATS[name] for r, name in zip(self.results, formats)}
        with quantized(self.model, assignment, self.weights):
            return self.runner.score(0)

    def measure_options(self, chosen: list[Option]) -> Score:
        return self.measure([o.format for o in chosen])

    def calibrated_options(self) -> list[list[Option]]:
        if self.calibrated is None:
            self.calibrated = calibrate(self.model, self.runner, self.results, self.weights)
        return [
            [Option(c.format, c.bytes, kls[c.format]) for c in r.costs.values()]
            for r, kls in zip(self.results, self.calibrated)
        ]

    def uniforms(self, say: Any) -> list[dict[str, Any]]:
        """The baseline a plan is judged against: each requested format on every unit it applies to, measured. Only
        `complete` ones compete: those covering every unit of the kinds their engine quantizes (vLLM formats never
        cover the embedding; int4-g128 and fp8-block need input widths divisible by 128)."""
        if self.uniform_rows is not None:
            return self.uniform_rows
        self.uniform_rows = []
        for fmt in (FORMATS[name] for name in self.request.formats):
            formats = [fmt.name if u.applies(fmt) else BF16 for u in self.units]
            if all(name == BF16 for name in formats):
                continue
            score = self.measure(formats)
            nbytes = self.kept_bytes + sum(u.nbytes(FORMATS[n]) for u, n in zip(self.units, formats))
            self.uniform_rows.append(
                {
                    "format": fmt.name,
                    "bytes": math.ceil(nbytes),
                    "measured_kl": score.kl,
                    "predicted_kl": sum(r.costs.get(fmt.name, r.costs[BF16]).kl for r in self.results),
                    "top1": score.top1,
                    "complete": all(u.applies(fmt) for u in self.units if u.kind in fmt.kinds),
                    "kept_bf16": [u.name for u, n in zip(self.units, formats) if n == BF16 and u.kind in fmt.kinds],
                }
            )
            say(f"  uniform {fmt.name}: {math.ceil(nbytes)} bytes, measured KL {score.kl:.3e}")
        return self.uniform_rows


def prepare(request: Request, say: Any) -> Swept:
    from onboard.environment import resolve_local

    formats, left_out = usable(request.formats)
    if not formats:
        raise InputError(
            f"--formats: none of {', '.join(request.formats)} can be simulated here", "; ".join(left_out.values())
        )
    request = replace(request, formats=formats)
    folder = resolve_local(request.source, request.revision)
    model, runtime, hf = _load(folder, request.dtype)
    sequences, prompts_from = _sequences(folder, request.golden, model, request.max_tokens)
    units, kept = find_units(model)
    if not units:
        raise InputError(f"{folder}: no quantizable weights found (no linear, expert or embedding tensors by name)")
    say(f"quantize-plan: {len(units)} units, {len(sequences)} prompts ({prompts_from}), {runtime}, {request.dtype}")
    runner = Runner(model, sequences, hf=hf)
    runner.record_reference(matmul_modules(model, units), unit_modules(model, units))
    weights = QuantizedWeights()
    candidates = [FORMATS[name] for name in request.formats]
    results, seconds = sweep(model, runner, units, candidates, weights, say)
    return Swept(
        request,
        folder,
        model,
        runtime,
        runner,
        units,
        kept * 2.0,
        results,
        seconds,
        prompts_from,
        weights,
        left_out=left_out,
    )


def plan(swept: Swept, request: Request, say: Any) -> Outcome:
    """Choose and measure a plan for `request`'s budget or size (its other fields are the sweep's)."""
    planning = _Planning(swept, request, say)
    chosen, met = planning.within_size() if request.target_bytes is not None else planning.within_budget()
    rounds = planning.rounds
    plan_bytes = swept.kept_bytes + sum(c.bytes for c in chosen)
    uniforms = swept.uniforms(say)
    best = _best_uniform(uniforms, request)
    measured = rounds[-1]["measured_kl"]
    runner, results = swept.runner, swept.results
    summary = {
        "budget_kl": request.budget_kl,
        "predicted_kl": sum(c.kl for c in chosen),
        "measured_kl": measured,
        "bytes": math.ceil(plan_bytes),
        "bf16_bytes": math.ceil(swept.bf16_bytes),
        "uniform_best": best and {k: best[k] for k in ("format", "bytes", "measured_kl")},
        "units": [
            {"unit": r.unit.name, "layer": r.unit.layer, "kind": r.unit.kind, "format": c.format, "kl_alone": c.kl}
            for r, c in zip(results, chosen)
        ],
    }
    detail = {
        "stage": "quantize-plan",
        "passed": met,
        "source": swept.request.source,
        "checkpoint": str(swept.folder),
        **summary,
        "target_bytes": request.target_bytes,
        "met": met,
        "runtime": swept.runtime,
        "dtype": swept.request.dtype,
        "formats": list(swept.request.formats),
        "formats_left_out": swept.left_out,
        "quantizer": ggml_native.describe(),
        "prompts": {
            "count": len(runner.sequences),
            "positions": runner.positions,
            "from": swept.prompts_from,
            "max_tokens": swept.request.max_tokens,
        },
        "saved": {
            "vs_bf16_bytes": math.ceil(swept.bf16_bytes - plan_bytes),
            "vs_uniform_best_bytes": best and best["bytes"] - math.ceil(plan_bytes),
        },
        "same_bytes_uniform": _nearest_uniform(uniforms, plan_bytes, measured),
        "uniform": uniforms,
        "rounds": rounds,
        "sensitivity": [_describe(r) for r in results],
        "cost": {
            "sweep_seconds": round(swept.seconds, 3),
            "forward_seconds": round(runner.forward_seconds, 4),
            "units": len(swept.units),
            "sweep_over_units_x_forward": round(
                swept.seconds / max(len(swept.units) * runner.forward_seconds, 1e-9), 3
            ),
        },
    }
    return Outcome(summary, detail, met)


def run(request: Request, say: Any) -> Outcome:
    """Sweep, plan, and write quantize-plan.json and the engine files into `request.out`."""
    from onboard.environment import slug
    from onboard.fsutil import output_folder

    with output_folder(request.out or Path("quantize") / slug(request.source)) as out:  # before the sweep
        swept = prepare(request, say)
        outcome = plan(swept, request, say)
        outcome.files = emit.write_files(out, outcome.detail, swept.folder, request.source)
    return outcome


def _load(folder: Path, dtype: str) -> tuple[Any, str, bool]:
    """(model, runtime in words, transformers calling convention?)."""
    from onboard.reference import BUILTIN, reference_for
    from onboard.validate_serving.runtime import load_candidate

    reference = reference_for(folder)
    runtime = "auto" if reference.kind == BUILTIN else "adapter"
    try:
        candidate = load_candidate(folder, dtype, runtime=runtime)
    except InputError as exc:
        if runtime == "adapter":
            raise InputError(
                f"{folder}: {reference.detail}; quantize-plan runs the generated adapter or transformers in process "
                "and never the repository's code",
                f"generate the adapter first (onboard generate {folder}), then rerun",
            ) from exc
        raise
    if candidate.info.kind == "adapter":
        return candidate.model, f"generated adapter (onboard.adapters.{reference.model_type})", False
    return candidate.model, "transformers (trust_remote_code=False)", True


def _sequences(folder: Path, golden: Path | None, model: Any, max_tokens: int) -> tuple[list[tuple[int, ...]], str]:
    if golden is not None:
        from onboard.validate_serving.golden import assert_same_checkpoint, read_golden

        goldens = read_golden(golden)
        assert_same_checkpoint(goldens, folder)
        return [p.sequence[:max_tokens] for p in goldens.prompts], f"goldens {golden}"
    from onboard.validate_serving.prompts import build_suite
    from onboard.verify_tokenizer.subject import load_tokenizer

    vocab = int(model.get_input_embeddings().weight.shape[0]) if hasattr(model, "get_input_embeddings") else None
    if vocab is None:
        vocab = max(p.shape[0] for n, p in model.named_parameters() if "embed" in n and p.ndim == 2)
    suite = build_suite(load_tokenizer(folder), None, vocab_size=vocab, max_new_tokens=0, max_long_tokens=max_tokens)
    return [s.ids[:max_tokens] for s in suite], "the golden prompt suite, prompts only (no --golden)"


def _options(results: list[Sensitivity], scale: float = 1.0) -> list[list[Option]]:
    return [[Option(c.format, c.bytes, c.kl * scale) for c in r.costs.values()] for r in results]


@dataclass
class _Planning:
    """Choosing one plan: the sweep, the request's budget or size, and every round measured so far."""

    swept: Swept
    request: Request
    say: Any
    rounds: list[dict[str, Any]] = field(default_factory=list)

    def within_size(self) -> tuple[list[Option], bool]:
        """(the plan, fits?) for --target-bytes; the knapsack over calibrated KLs is a second start where it differs."""
        swept, options = self.swept, _options(self.swept.results)
        cap = float(self.request.target_bytes or 0) - swept.kept_bytes
        chosen = least_kl(options, cap)
        met = chosen is not None
        if chosen is None:  # the knapsack rounds bytes up: the smallest plan may still fit exactly
            chosen = [min(unit, key=lambda o: (o.bytes, o.kl)) for unit in options]
            met = sum(o.bytes for o in chosen) <= cap
        if not met:  # the smallest plan there is, measured, and said not to fit
            smallest = math.ceil(swept.kept_bytes + sum(o.bytes for o in chosen))
            self.say(f"quantize-plan: no plan fits {self.request.target_bytes} bytes (the smallest is {smallest})")
        score = self.record(chosen, swept.measure_options(chosen))
        if not met:
            return chosen, False
        starts = [(options, chosen, score)]
        calibrated = swept.calibrated_options()
        other = least_kl(calibrated, cap)
        if other is not None and [o.format for o in other] != [o.format for o in chosen]:
            measured = self.record(other, swept.measure_options(other), calibrated=True)
            self.say(f"  calibrated knapsack: measured {measured.kl:.3e} (the first plan {score.kl:.3e})")
            starts.append((calibrated, other, measured))
        # Whole plans the refinement may measure: two per unit where that is more (about the sweep's own cost).
        measurements = max(MEASUREMENTS, 2 * len(swept.units))
        found = []
        for unit_options, start, start_score in starts:  # each refined with the KLs that chose it
            start, start_score = self.no_worse_than_uniform(unit_options, start, start_score)
            found.append(least_kl_within(unit_options, start, start_score, cap, swept.measure_options, measurements))
        for refined in sorted(found, key=lambda r: -r.score.kl):  # the best last: the plan is the last round
            chosen = self.refined(refined)
        return chosen, True

    def within_budget(self) -> tuple[list[Option], bool]:
        """(the plan, within?) for --budget-kl."""
        swept, budget, scale = self.swept, float(self.request.budget_kl or 0.0), 1.0
        options = _options(swept.results)
        chosen: list[Option] = []
        for number in range(1, MAX_ROUNDS + 1):
            scaled = fewest_bytes(_options(swept.results, scale), budget)
            assert scaled is not None  # keeping every unit in bf16 (KL 0) always fits
            chosen = [next(o for o in unit if o.format == pick.format) for unit, pick in zip(options, scaled)]
            score = self.record(chosen, swept.measure_options(chosen), scale)
            predicted = sum(o.kl for o in chosen)
            self.say(
                f"  plan round {number}: predicted KL {predicted:.3e}, measured {score.kl:.3e} (budget {budget:.3e})"
            )
            if score.kl <= budget:
                chosen, score = self.no_worse_than_uniform(options, chosen, score)
                return self.refined(fewest_bytes_within(options, chosen, score, budget, swept.measure_options)), True
            scale *= score.kl / predicted if predicted > 0 else 2.0
        return chosen, False

    def no_worse_than_uniform(
        self, options: list[list[Option]], chosen: list[Option], score: Score
    ) -> tuple[list[Option], Score]:
        """A uniform format within the size (or the budget) is a plan too, already measured: the search goes on from it
        when it measures less KL (has fewer bytes), so no plan is worse than it."""
        swept = self.swept
        best = _best_uniform(swept.uniforms(self.say), self.request)
        if best is None:
            return chosen, score
        if self.request.target_bytes is not None:
            better = best["measured_kl"] < score.kl
        else:
            better = best["bytes"] < math.ceil(swept.kept_bytes + sum(o.bytes for o in chosen))
        if not better:
            return chosen, score
        fmt = FORMATS[best["format"]]
        names = [fmt.name if r.unit.applies(fmt) else BF16 for r in swept.results]
        chosen = [next(o for o in unit if o.format == n) for unit, n in zip(options, names)]
        score = self.record(
            chosen, Score(best["measured_kl"], best["top1"], swept.runner.positions), from_uniform=fmt.name
        )
        self.say(f"  the uniform {fmt.name} measures better than the search's plan: refining from it")
        return chosen, score

    def refined(self, refined: Refined) -> list[Option]:
        """Record the measured neighbours as one more round; the plan is the best one measured."""
        if not refined.tried and self.rounds[-1]["formats"] == [o.format for o in refined.chosen]:
            return refined.chosen
        names = [u.name for u in self.swept.units]
        tried = [{**t, "changes": {names[i]: f for i, f in t["changes"].items()}} for t in refined.tried]
        self.record(refined.chosen, refined.score, self.rounds[-1]["kl_scale"], refined=tried)
        kept = sum(t["kept"] for t in tried)
        self.say(
            f"  refinement: {len(tried)} neighbouring plans measured, {kept} kept; measured {refined.score.kl:.3e}"
        )
        return refined.chosen

    def record(self, chosen: list[Option], score: Score, scale: float = 1.0, **extra: Any) -> Score:
        """`chosen`, measured as `score`, as the next round."""
        self.rounds.append(
            {
                "round": len(self.rounds) + 1,
                "kl_scale": scale,
                "predicted_kl": sum(o.kl for o in chosen),
                "measured_kl": score.kl,
                "top1": score.top1,
                "bytes": math.ceil(self.swept.kept_bytes + sum(o.bytes for o in chosen)),
                "formats": [o.format for o in chosen],
                **extra,
            }
        )
        return score


def _describe(result: Sensitivity) -> dict[str, Any]:
    return {
        "unit": result.unit.name,
        "layer": result.unit.layer,
        "kind": result.unit.kind,
        "elements": result.unit.elements,
        "probe": result.probe,
        "weight_outlier": result.weight_outlier,
        "activation_outlier": result.activation_outlier,
        "activations_simulated": result.activations_simulated,
        "formats": {
            name: {"bytes": math.ceil(c.bytes), "kl": c.kl, "measured": c.measured, "top1": c.top1}
            for name, c in result.costs.items()
        },
    }


def _best_uniform(rows: list[dict[str, Any]], request: Request) -> dict[str, Any] | None:
    """--budget-kl: the complete uniform format with the fewest bytes within the budget; --target-bytes: the least KL
    within the size."""
    complete = [u for u in rows if u["complete"]]
    if request.budget_kl is not None:
        within = [u for u in complete if u["measured_kl"] <= request.budget_kl]
        return min(within, key=lambda u: u["bytes"]) if within else None
    within = [u for u in complete if u["bytes"] <= (request.target_bytes or 0)]
    return min(within, key=lambda u: u["measured_kl"]) if within else None


def _nearest_uniform(rows: list[dict[str, Any]], plan_bytes: float, measured: float) -> dict[str, Any] | None:
    """The complete uniform format whose bytes are nearest the plan's, with plan KL / its KL."""
    complete = [u for u in rows if u["complete"]]
    if not complete:
        return None
    nearest = min(complete, key=lambda u: abs(u["bytes"] - plan_bytes))
    ratio = measured / nearest["measured_kl"] if nearest["measured_kl"] > 0 else None
    keys = ("format", "bytes", "measured_kl")
    return {**{k: nearest[k] for k in keys}, "plan_over_uniform_kl": ratio}
