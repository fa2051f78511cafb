"""Detection limits of the fidelity checks per dtype, on the trained tiny reference model (tests/fixtures/trained-qwen3).

For each dtype: the smallest logit scale, rope-theta and rms_norm_eps change each parity check catches, and how far
clean candidates sit from the limits (the generated adapter, a second implementation; and re-parametrised reruns,
tests/fidelity/reruns.py). The README section "What each check can and cannot see" quotes this output.

    .venv/bin/python benchmarks/fidelity_limits.py [--json]      # ~1-2 min on 2 idle cores
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

DTYPES = ("bfloat16", "float16", "float32")
CHECKS = ("logit_parity", "logit_scale", "greedy_parity")
SWEEPS = {
    "logit scale": [1.0005, 1.001, 1.002, 1.005, 1.01, 1.02, 1.03, 1.05],
    "rope theta": [1.001, 1.01, 1.03, 1.1, 1.3, 2.0, 10.0, 100.0],
    "rms_norm_eps": [2.0, 5.0, 10.0, 30.0, 100.0, 1000.0],
}
DRAWS, RERUNS = 8, 100


def _candidate(fidelity, golden, kind: str, factor: float, dtype: str):
    from onboard.reference import load_transformers
    from onboard.validate_serving.runtime import InProcessCandidate
    from tests.fidelity.defects import Defect, scale_logits
    from tests.fidelity.reruns import TeacherForced

    if kind == "logit scale":
        defect = Defect(f"x{factor}", "trained", "logit_scale", wrap=scale_logits(factor))
    elif kind == "rope theta":
        defect = Defect(f"theta-x{factor}", "trained", "logit_parity", config={"rope_theta_factor": factor})
    else:
        defect = Defect(f"eps-x{factor}", "trained", "logit_parity", config={"rms_norm_eps": 1e-6 * factor})
    path = fidelity.defective(defect)
    model = load_transformers(path, dtype)
    if defect.wrap is not None:
        model = defect.wrap(model)
    return TeacherForced(InProcessCandidate(model, path, dtype, kind="adapter", hf=True), golden)


def measure(root: Path) -> dict:
    import torch

    from onboard.validate_serving.candidates import load_candidate
    from onboard.validate_serving.run import validate
    from tests.fidelity.conftest import Fidelity
    from tests.fidelity.reruns import TeacherForced, noisy_runs, replay

    torch.set_num_threads(1)
    fidelity = Fidelity(root)
    golden = fidelity.golden("trained")
    out: dict = {"positions": sum(len(p.rows) for p in golden.prompts), "dtypes": {}}
    for dtype in DTYPES:
        noise = golden.noise(dtype)
        entry: dict = {
            "noise": {
                "kl_mean": noise.kl_mean,
                "kl_p99": noise.kl_p99,
                "max_logprob_error": noise.max_logprob_error,
                "swap_rate": noise.swap_rate,
                "margin_max": noise.margin_max,
            }
        }
        for kind, factors in SWEEPS.items():
            caught: dict[str, float | None] = {c: None for c in CHECKS}
            for factor in factors:
                result = validate(golden, _candidate(fidelity, golden, kind, factor, dtype), performance=False,
                                  only=frozenset())  # fmt: skip
                for check in CHECKS:
                    if check in result["failed"] and caught[check] is None:
                        caught[check] = factor
            entry[kind] = caught
        adapter = validate(golden, TeacherForced(load_candidate(fidelity.checkpoint("trained"), dtype,
                           runtime="adapter"), golden), performance=False, only=frozenset())  # fmt: skip
        draws = noisy_runs(fidelity.checkpoint("trained"), golden, dtype, DRAWS, min(20, 2 * golden.top_k))
        reruns = [validate(golden, replay(golden, draws, s, dtype), performance=False, only=frozenset())
                  for s in range(RERUNS)]  # fmt: skip
        means = [r["check_data"]["logit_parity"]["kl_mean"] / noise.kl_mean for r in reruns]
        entry["adapter_kl_mean_ratio"] = adapter["check_data"]["logit_parity"]["kl_mean"] / noise.kl_mean
        entry["adapter_passed"] = adapter["passed"]
        entry["rerun_kl_mean_ratio"] = [min(means), max(means)]
        entry["rerun_alarms"] = sum(1 for r in reruns if not r["passed"])
        entry["rerun_slope_deviation_max"] = max(abs(r["check_data"]["logit_scale"]["slope"] - 1) for r in reruns)
        out["dtypes"][dtype] = entry
    return out


def table(result: dict) -> str:
    lines = [
        "| change (trained fixture) | dtype | logit_parity | logit_scale | greedy_parity |",
        "|---|---|---|---|---|",
    ]
    for kind in SWEEPS:
        for dtype, entry in result["dtypes"].items():
            cells = [f"x{entry[kind][c]:g}" if entry[kind][c] else f"> x{SWEEPS[kind][-1]:g}" for c in CHECKS]
            lines.append(f"| {kind} | {dtype} | " + " | ".join(cells) + " |")
    lines += ["", "| dtype | reference noise: mean KL / p99 KL / worst logprob error / swap rate | adapter mean KL "
              "(x reference) | reruns mean KL (x reference) | rerun alarms | rerun max abs(slope-1) |", "|---|---|---|---|---|---|"]  # fmt: skip
    for dtype, e in result["dtypes"].items():
        n = e["noise"]
        lines.append(f"| {dtype} | {n['kl_mean']:.2g} / {n['kl_p99']:.2g} / {n['max_logprob_error']:.2g} / "
                     f"{n['swap_rate']:.1%} | {e['adapter_kl_mean_ratio']:.2f} ({'pass' if e['adapter_passed'] else 'FAIL'}) "
                     f"| {e['rerun_kl_mean_ratio'][0]:.2f}-{e['rerun_kl_mean_ratio'][1]:.2f} | {e['rerun_alarms']} of "
                     f"{RERUNS} | {e['rerun_slope_deviation_max']:.1e} |")  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="Print the measurements as JSON.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = measure(Path(tmp))
    print(json.dumps(result, indent=2) if args.json else table(result))


if __name__ == "__main__":
    main()
