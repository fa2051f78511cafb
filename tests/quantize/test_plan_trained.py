"""quantize-plan on the trained tiny fixture (tests/fixtures/trained-qwen3: trained-like magnitudes, stored in bf16,
run in bf16), through the generated qwen3 adapter. Issue 13's acceptance: at a size the uniform formats leave
between them, and at uniform Q4_1's (with Q3_K also MXFP4's and Q5_1's) own sizes, the plan's measured KL is at
most half the best uniform format's that fits the same size (Q6_K's: 0.54); a plan
for a KL budget is measured within it; a layer seeded with heavy weight outliers ranks most sensitive and keeps
more bits than the rest of the plan. The same-bytes criterion at every uniform size is asserted on the untied
quantization fixture (test_plan_untied.py), whose rows take K-quants natively; here they fall back."""

from __future__ import annotations

import shutil
import statistics
from pathlib import Path

import pytest

from onboard.quantize import plan as quantize_plan
from onboard.quantize.formats import BF16, FORMATS
from tests.ci import need

TRAINED = Path(__file__).resolve().parents[1] / "fixtures" / "trained-qwen3"
MAX_TOKENS = 256  # the long prompt cut to 256 tokens: the sweep stays around 15 s on 2 cores

pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.slow]  # one_thread: tests/quantize/conftest.py


def quiet(_message: str) -> None:
    return None


def _request(path: Path, **kwargs) -> quantize_plan.Request:  # type: ignore[no-untyped-def]
    return quantize_plan.Request(str(path), max_tokens=MAX_TOKENS, **kwargs)


@pytest.fixture(scope="module")
def swept() -> quantize_plan.Swept:
    return quantize_plan.prepare(_request(TRAINED, budget_kl=1.0), quiet)


def _uniform_bytes(swept: quantize_plan.Swept, name: str) -> float:
    fmt = FORMATS[name]
    return swept.kept_bytes + sum(u.nbytes(fmt if u.applies(fmt) else FORMATS[BF16]) for u in swept.units)


def test_plan_between_uniform_sizes_halves_the_best_uniform_kl(swept: quantize_plan.Swept) -> None:
    # Halfway between uniform Q5_1 and uniform Q6_K: the best uniform format that fits is Q5_1.
    target = int((_uniform_bytes(swept, "q5_1") + _uniform_bytes(swept, "q6_k")) / 2)
    outcome = quantize_plan.plan(swept, _request(TRAINED, target_bytes=target), quiet)
    s = outcome.summary
    assert outcome.met and s["bytes"] <= target
    assert s["uniform_best"]["format"] == "q5_1" and s["uniform_best"]["bytes"] <= target
    assert s["measured_kl"] <= 0.5 * s["uniform_best"]["measured_kl"], (s["measured_kl"], s["uniform_best"])
    # The sum of the sweep's per-unit KLs predicts the whole plan (the knapsack's first plan, measured). A plan
    # chosen over calibrated KLs (each unit's finest format measured alone) reports their sum, which over-predicts
    # (errors of different units partly cancel): up to 2.6x here.
    first = outcome.detail["rounds"][0]
    assert 0.5 < first["measured_kl"] / first["predicted_kl"] < 2.0, first
    assert s["measured_kl"] <= s["predicted_kl"] * 2.0


def test_plan_at_exactly_the_uniform_q4_1_size_halves_its_kl(swept: quantize_plan.Swept) -> None:
    # At a uniform format's own size (not between sizes); the others below. Where it does not hold on this fixture
    # (q3_k, q4_0, q4_k, q6_k, q8_0: 0.5-0.72x) the tied embedding, 35% of the weights, measures about half the
    # uniform's KL alone at the cheapest format it can take there: see benchmarks/bench_quantize_plan.py
    # --same-bytes (its bound column).
    uniform = {u["format"]: u for u in swept.uniforms(quiet)}
    target = uniform["q4_1"]["bytes"]
    outcome = quantize_plan.plan(swept, _request(TRAINED, target_bytes=target), quiet)
    s = outcome.summary
    assert outcome.met and s["bytes"] <= target and s["uniform_best"]["format"] == "q4_1"
    assert s["measured_kl"] <= 0.5 * s["uniform_best"]["measured_kl"], (s["measured_kl"], s["uniform_best"])


def test_plan_at_each_uniform_size_fits_and_measures_no_worse(swept: quantize_plan.Swept) -> None:
    # At every llama.cpp uniform format's exact size, the smallest included: the plan fits (the knapsack rounds
    # bytes up, and the smallest plan fits exactly), and what is kept is never measured worse than the knapsack's
    # first plan or the uniform format itself. Figures per size: bench_quantize_plan.py --same-bytes. Q3_K (IQ4_NL
    # on these 192-wide rows) is planned only where llama.cpp's own quantizers are installed (formats.usable).
    rows = {u["format"]: u for u in swept.uniforms(quiet) if u["complete"]}
    ratios = {}
    for name in [n for n in ("mxfp4", "q3_k", "q4_0", "q4_1", "q4_k", "q5_1", "q6_k", "q8_0") if n in rows]:
        outcome = quantize_plan.plan(swept, _request(TRAINED, target_bytes=rows[name]["bytes"]), quiet)
        s, first = outcome.summary, outcome.detail["rounds"][0]
        assert outcome.met and s["bytes"] <= rows[name]["bytes"], (name, s["bytes"])
        assert s["measured_kl"] <= min(first["measured_kl"], s["uniform_best"]["measured_kl"]), name
        ratios[name] = s["measured_kl"] / s["uniform_best"]["measured_kl"]
    smallest = min(rows[n]["bytes"] for n in ratios)
    assert max(r for n, r in ratios.items() if rows[n]["bytes"] > smallest) < 0.8, ratios
    # Issue 13's 0.5 at a uniform format's own size: Q4_1 (0.25) meets it; Q6_K measures 0.54 with every format (0.51
    # with llama.cpp's only), with llama.cpp's own quantizers. With Q3_K to pay for finer units (IQ4_NL here, 4.5 bits), MXFP4's size measures 0.33 and Q5_1's
    # 0.29 (without Q3_K: 1.0, MXFP4 being the smallest format, and 0.54). At Q4_0 and Q8_0 no plan can reach it (the
    # bench's bound). bf16 matmuls round differently per CPU (AMX, AVX-512, AVX2): Q6_K is asserted with room, so a
    # CI machine of another kind does not flip it (the 0.5 claims are test_plan_untied.py's).
    assert ratios["q4_1"] <= 0.5 and ratios["q6_k"] <= 0.6, ratios
    if "q3_k" not in ratios:
        need("llamacpp")  # MXFP4's and Q5_1's 0.5 need Q3_K, which only llama.cpp's own quantizers round
    assert ratios["mxfp4"] <= 0.5 and ratios["q5_1"] <= 0.5, ratios


def test_calibration_measures_the_finest_format_alone(swept: quantize_plan.Swept) -> None:
    options = swept.calibrated_options()
    for result, unit_options in zip(swept.results, options):
        predicted = [c for c in result.costs.values() if not c.measured]
        if not predicted:  # the tied embedding and head: every format measured in the sweep, nothing to correct
            assert [o.kl for o in unit_options] == [c.kl for c in result.costs.values()]
            continue
        finest = min(predicted, key=lambda c: c.energy or 0.0)
        alone = ["bf16"] * len(swept.results)
        alone[swept.results.index(result)] = finest.format
        calibrated = {o.format: o.kl for o in unit_options}
        assert calibrated[finest.format] == pytest.approx(swept.measure(alone).kl, rel=1e-4)
        by_energy = sorted(predicted, key=lambda c: c.energy or 0.0)  # interpolated: KL never falls as energy grows
        assert [calibrated[c.format] for c in by_energy] == sorted(calibrated[c.format] for c in by_energy)
        assert calibrated[result.probe] == result.costs[result.probe].kl  # the sweep's own measurement is kept
    # The point of it: the proportional prediction puts Q8_0 on a later layer's projections far below what it
    # measures alone (the floor of rounded activations and downstream bf16 roundings).
    later = [i for i, r in enumerate(swept.results) if r.unit.layer == 3 and "q8_0" in r.costs]
    assert all(options[i][list(swept.results[i].costs).index("q8_0")].kl > 2 * swept.results[i].costs["q8_0"].kl
               for i in later)  # fmt: skip


def test_plan_within_a_kl_budget_is_measured_within_it(swept: quantize_plan.Swept) -> None:
    budget = 2e-3
    outcome = quantize_plan.plan(swept, _request(TRAINED, budget_kl=budget), quiet)
    s = outcome.summary
    assert outcome.met and s["measured_kl"] <= budget
    assert set(s) == {"budget_kl", "predicted_kl", "measured_kl", "bytes", "bf16_bytes", "uniform_best", "units"}
    # The best uniform format within the budget needs more bytes than the plan.
    assert s["uniform_best"]["measured_kl"] <= budget and s["bytes"] < s["uniform_best"]["bytes"]
    uniform = {u["format"]: u for u in outcome.detail["uniform"]}
    assert uniform["q4_k"]["measured_kl"] > budget  # the cheaper uniform format would not have met it


def _seed_outliers(src: Path, dst: Path, layer: int, factor: float = 256.0, columns: int = 32) -> Path:
    """Heavy weight outliers in layer `layer`'s MLP without changing its function: `columns` input columns of
    down_proj x factor, the matching rows of up_proj / factor (a power of two: exact in bf16)."""
    import torch
    from safetensors.torch import load_file, save_file

    shutil.copytree(src, dst)
    tensors = load_file(str(dst / "model.safetensors"))
    up, down = f"model.layers.{layer}.mlp.up_proj.weight", f"model.layers.{layer}.mlp.down_proj.weight"
    cols = torch.randperm(tensors[down].shape[1], generator=torch.Generator().manual_seed(0))[:columns]
    tensors[up], tensors[down] = tensors[up].clone(), tensors[down].clone()
    tensors[up][cols] = (tensors[up][cols].float() / factor).to(tensors[up].dtype)
    tensors[down][:, cols] = (tensors[down][:, cols].float() * factor).to(tensors[down].dtype)
    save_file(tensors, str(dst / "model.safetensors"), metadata={"format": "pt"})
    return dst


def test_seeded_outlier_layer_ranks_most_sensitive_and_keeps_precision(tmp_path: Path) -> None:
    seeded = _seed_outliers(TRAINED, tmp_path / "seeded", layer=2)
    request = _request(seeded, budget_kl=2e-3)
    swept = quantize_plan.prepare(request, quiet)
    outcome = quantize_plan.plan(swept, request, quiet)
    rows = {r["unit"]: r for r in outcome.detail["sensitivity"]}
    coarsest = {name: max(f["kl"] for n, f in row["formats"].items() if n != BF16) for name, row in rows.items()}
    assert max(coarsest, key=coarsest.get) == "layer.2.mlp.down", coarsest
    assert max(rows, key=lambda n: rows[n]["weight_outlier"]) == "layer.2.mlp.down"
    assert outcome.met and outcome.summary["measured_kl"] <= 2e-3
    units = {u.name: u for u in swept.units}

    def bits(unit: str, fmt: str) -> float:
        return units[unit].nbytes(FORMATS[fmt]) * 8 / units[unit].elements

    chosen = {u["unit"]: u["format"] for u in outcome.summary["units"]}
    seeded_bits = bits("layer.2.mlp.down", chosen["layer.2.mlp.down"])
    others = [bits(u, f) for u, f in chosen.items() if u != "layer.2.mlp.down"]
    assert seeded_bits >= 8 and seeded_bits > statistics.median(others), chosen
