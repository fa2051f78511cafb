"""Cost of quantize-plan's sensitivity sweep against units x one forward over the prompt suite.

A ~100M-parameter Qwen3-shaped model built from its config with seeded random weights (bf16, untied head), the
token-id prompt suite golden record uses without a tokenizer (long prompt capped at 1024 tokens), every candidate
format. Target (issue 13): sweep seconds <= 2 x units x forward seconds.

    .venv/bin/python benchmarks/bench_quantize_plan.py            # ~100M parameters, 26 units
    .venv/bin/python benchmarks/bench_quantize_plan.py --quick    # a tiny model (smoke test)

--same-bytes [FORMATS] instead: on the trained fixture (tests/fixtures/trained-qwen3, bf16, prompts cut to 256
tokens), a plan at exactly each complete uniform format's size, its measured KL over that uniform's (issue 13:
<= 0.5), before refinement (the knapsack's plan, measured) and after, and the largest unit's KL alone at that
uniform format over the uniform's KL (a unit that alone costs more than half leaves a plan of the same bytes
little room). `bound`: the least KL that the most costly unit of any plan within the size measures alone (every
unit measured alone at every format, then the smallest threshold whose cheapest formats fit), over the uniform's
KL. A plan measures at least its worst unit alone (quantizing more does not undo an error; every plan measured
here does), so where `bound` > 0.5 no plan of that size reaches 0.5.

    .venv/bin/python benchmarks/bench_quantize_plan.py --same-bytes llama.cpp
    .venv/bin/python benchmarks/bench_quantize_plan.py --same-bytes llama.cpp --fixture tests/fixtures/trained-qwen3-untied

`--fixture` plans another trained checkpoint: trained-qwen3-untied is the quantization fixture (hidden 256, so
K-quants apply natively, and an untied head); the default, the tied 192-wide reference, stores K-quants as their
fallbacks.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

FULL = {"hidden_size": 768, "intermediate_size": 2048, "num_hidden_layers": 12, "num_attention_heads": 12,
        "num_key_value_heads": 4, "head_dim": 64, "vocab_size": 16384}  # fmt: skip
QUICK = {"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 1024}  # fmt: skip


def build(dims: dict, seed: int = 0):  # type: ignore[no-untyped-def]
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model("qwen3", **dims, tie_word_embeddings=False, max_position_embeddings=4096,
                                  bos_token_id=0, eos_token_id=1, pad_token_id=0)  # fmt: skip
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=torch.bfloat16)
    return model.eval()


TRAINED = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "trained-qwen3"
FORWARD_REPEATS = 5


def same_bytes(formats: str, fixture: Path = TRAINED) -> list[dict]:
    """Per complete uniform format of a trained checkpoint: the plan at its exact size against it."""
    from onboard.quantize import plan as quantize_plan
    from onboard.quantize.formats import parse_formats

    request = quantize_plan.Request(str(fixture), budget_kl=1.0, max_tokens=256, formats=parse_formats(formats))
    swept = quantize_plan.prepare(request, lambda _m: None)
    alone = _alone(swept)
    rows = []
    print(f"{'uniform':<10} {'bytes':>9} {'its KL':>9} {'plan KL':>9} {'before':>7} {'after':>7} {'bound':>7}  "
          "largest unit alone")  # fmt: skip
    for row in sorted(swept.uniforms(lambda _m: None), key=lambda r: r["bytes"]):
        if not row["complete"]:
            continue
        sized = quantize_plan.Request(str(fixture), target_bytes=row["bytes"], max_tokens=256, formats=request.formats)
        outcome = quantize_plan.plan(swept, sized, lambda _m: None)
        s, rounds = outcome.summary, outcome.detail["rounds"]
        best = s["uniform_best"]
        largest = max(swept.results, key=lambda r: r.costs.get(row["format"], r.costs["bf16"]).kl)
        largest_kl = largest.costs[row["format"]].kl
        rows.append({"format": row["format"], "bytes": row["bytes"], "uniform_kl": best["measured_kl"],
                     "plan_kl": s["measured_kl"], "before": rounds[0]["measured_kl"] / best["measured_kl"],
                     "after": s["measured_kl"] / best["measured_kl"], "largest_unit": largest.unit.name,
                     "largest_alone": largest_kl / best["measured_kl"],
                     "bound": _minimax(alone, row["bytes"] - swept.kept_bytes) / best["measured_kl"],
                     "worst_alone_over_plan": _worst_alone(alone, swept, s["units"]) / s["measured_kl"]})  # fmt: skip
        r = rows[-1]
        print(f"{r['format']:<10} {r['bytes']:>9} {r['uniform_kl']:>9.2e} {r['plan_kl']:>9.2e} {r['before']:>7.3f} "
              f"{r['after']:>7.3f} {r['bound']:>7.3f}  {r['largest_unit']} {r['largest_alone']:.2f}x")  # fmt: skip
    worst = max(r["worst_alone_over_plan"] for r in rows)
    print(f"the plans' worst unit alone over the plan's KL: at most {worst:.3f} (<= 1: the bound's premise holds)")
    return rows


def _worst_alone(alone: list[list[tuple[float, float]]], swept, units: list[dict]) -> float:  # type: ignore[no-untyped-def]
    """The largest KL alone of a plan's units at their chosen formats."""
    names = [list(r.costs) for r in swept.results]
    return max(costs[names[i].index(u["format"])][1] for i, (costs, u) in enumerate(zip(alone, units)))


def _alone(swept) -> list[list[tuple[float, float]]]:  # type: ignore[no-untyped-def]
    """Per unit, (bytes, KL measured with only this unit quantized) for every format it takes (bf16: 0)."""
    from onboard.quantize.apply import quantized
    from onboard.quantize.formats import FORMATS
    from onboard.quantize.sensitivity import start_layer

    out = []
    for result in swept.results:
        costs = []
        for name, cost in result.costs.items():
            if not cost.measured:
                with quantized(swept.model, {result.unit: FORMATS[name]}, swept.weights):
                    cost = type(cost)(
                        name, cost.bytes, swept.runner.score(start_layer(result.unit, swept.runner)).kl, True
                    )
            costs.append((cost.bytes, cost.kl))
        out.append(costs)
    return out


def _minimax(alone: list[list[tuple[float, float]]], cap: float) -> float:
    """The least t such that every unit's cheapest format with KL alone <= t fits within `cap` bytes together."""
    for threshold in sorted({kl for costs in alone for _, kl in costs}):
        if sum(min(b for b, kl in costs if kl <= threshold) for costs in alone) <= cap:
            return threshold
    return float("inf")


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tiny model (smoke test)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--same-bytes", nargs="?", const="all", metavar="FORMATS",
                        help="the plan at each uniform format's size on the trained fixture (formats: all)")  # fmt: skip
    parser.add_argument("--fixture", type=Path, default=TRAINED,
                        help="the trained checkpoint --same-bytes plans (default: tests/fixtures/trained-qwen3)")  # fmt: skip
    args = parser.parse_args(argv)
    import torch

    if args.same_bytes:
        if args.threads:
            torch.set_num_threads(args.threads)
        return {"rows": same_bytes(args.same_bytes, args.fixture)}  # type: ignore[dict-item]

    from onboard.quantize import ggml_native
    from onboard.quantize.apply import QuantizedWeights
    from onboard.quantize.formats import CANDIDATES, FORMATS, usable
    from onboard.quantize.forward import Runner
    from onboard.quantize.plan import MAX_SEQUENCE_TOKENS
    from onboard.quantize.sensitivity import calibrate, matmul_modules, sweep, unit_modules
    from onboard.quantize.units import find_units
    from onboard.validate_serving.prompts import build_suite

    if args.threads:
        torch.set_num_threads(args.threads)
    dims = QUICK if args.quick else FULL
    model = build(dims)
    parameters = sum(p.numel() for p in model.parameters())
    cap = 128 if args.quick else MAX_SEQUENCE_TOKENS
    suite = build_suite(None, None, vocab_size=dims["vocab_size"], max_new_tokens=0, max_long_tokens=cap)
    units, _ = find_units(model)
    runner = Runner(model, [s.ids[:cap] for s in suite], hf=True)
    started = time.perf_counter()
    runner.record_reference(matmul_modules(model, units), unit_modules(model, units))
    reference_seconds = time.perf_counter() - started
    runner.time_forward(FORWARD_REPEATS)  # the unit of cost: the median of several plain forwards, not one sample
    kept, left_out = usable(CANDIDATES)  # as quantize-plan: Q3_K only through llama.cpp's library
    candidates = [FORMATS[name] for name in kept]
    weights = QuantizedWeights()
    results, seconds = sweep(model, runner, units, candidates, weights, lambda _m: None)
    budget = len(units) * runner.forward_seconds
    ratio = seconds / budget
    # quantize-plan also measures each unit's finest format alone before planning (calibrate): counted apart.
    started = time.perf_counter()
    calibrate(model, runner, results, weights)
    calibration = time.perf_counter() - started
    print(f"model: qwen3 {parameters / 1e6:.1f}M parameters, {len(units)} units, {len(runner.sequences)} prompts, "
          f"{runner.positions} positions, {torch.get_num_threads()} threads")  # fmt: skip
    print(
        f"one forward over the suite: {runner.forward_seconds:.3f} s (median of {FORWARD_REPEATS}; reference run with "
        f"hooks {reference_seconds:.2f} s)"
    )
    # The llama.cpp formats cost 4-10x more through the torch port than through llama.cpp's own library: say which.
    print(f"llama.cpp formats quantized by: {ggml_native.describe()}")
    for name, why in left_out.items():
        print(f"left out: {name}: {why}")
    print(f"sweep ({len(candidates)} formats): {seconds:.1f} s; units x forward: {budget:.1f} s")
    print(f"ratio sweep / (units x forward): {ratio:.2f} (target <= 2)")
    print(f"calibration (finest format of each unit measured alone): {calibration:.1f} s; sweep + calibration / "
          f"(units x forward): {(seconds + calibration) / budget:.2f}")  # fmt: skip
    return {"sweep_seconds": seconds, "forward_seconds": runner.forward_seconds, "units": len(units), "ratio": ratio,
            "calibration_seconds": calibration}  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
