"""The sensitivity sweep: what each format costs at each unit, quantized alone.

Per unit, each format's error energy on the unit's output is cheap to compute; the format with the most (the probe)
is MEASURED (KL over the suite, resumed at the unit's layer) and the others predicted in proportion to their energy.
The head and a tied embedding move the logits directly: every format is measured there.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from onboard.quantize.apply import (
    QuantizedWeights,
    Rounding,
    activation_modules,
    activations_simulated,
    quantized,
)
from onboard.quantize.formats import BF16, FORMATS, Format
from onboard.quantize.forward import Runner
from onboard.quantize.units import Unit


@dataclass(frozen=True)
class Cost:
    format: str
    bytes: float
    kl: float
    measured: bool
    top1: float | None = None
    energy: float | None = None


@dataclass
class Sensitivity:
    unit: Unit
    costs: dict[str, Cost] = field(default_factory=dict)
    probe: str | None = None
    weight_outlier: float = 0.0
    """max |w| / rms(w) over the unit's tensors."""
    activation_outlier: float | None = None
    """max |x| / rms(x) of the inputs its matmuls saw in the reference run (None: not observable)."""
    activations_simulated: bool = True


def start_layer(unit: Unit, runner: Runner) -> int:
    """First decoder layer whose output a change to `unit` can move."""
    if unit.kind == "embedding":
        return 0
    if unit.kind == "head" or unit.layer is None:
        return len(runner.layers)
    return unit.layer


def matmul_modules(model: Any, units: list[Unit]) -> list[Any]:
    """Modules whose inputs tell a unit's activation outliers: holders of its 2-D weights, owners of 3-D ones."""
    found: dict[int, Any] = {}
    for unit in units:
        for tensor in unit.tensors:
            holders = activation_modules(model, tensor) or [
                m for m in model.modules() if any(p is tensor.param for p in m.parameters(recurse=False))
            ]
            found.update((id(m), m) for m in holders if "Embedding" not in type(m).__name__)
    return list(found.values())


def sweep(
    model: Any, runner: Runner, units: list[Unit], candidates: list[Format], weights: QuantizedWeights, say: Any
) -> tuple[list[Sensitivity], float]:
    """Per-unit costs of every applicable candidate; (results in unit order, seconds spent)."""
    started = time.perf_counter()
    results = []
    for number, unit in enumerate(units, start=1):
        result = Sensitivity(
            unit, weight_outlier=_weight_outlier(unit), activations_simulated=activations_simulated(unit)
        )
        result.activation_outlier = _activation_outlier(model, runner, unit)
        bf16 = FORMATS[BF16]
        result.costs[BF16] = Cost(BF16, unit.nbytes(bf16), 0.0, True, 1.0, 0.0)
        usable = [f for f in candidates if unit.applies(f)]
        start = start_layer(unit, runner)
        if unit.kind == "head" or unit.name == "embedding+head":
            for fmt in usable:
                with quantized(model, {unit: fmt}, weights):
                    score = runner.score(start)
                weights.drop(unit, fmt)
                result.costs[fmt.name] = Cost(fmt.name, unit.nbytes(fmt), score.kl, True, score.top1)
        elif usable:
            energies, probe = _energies(model, runner, unit, usable, weights)
            with quantized(model, {unit: probe}, weights):
                score = runner.score(start)
            weights.drop(unit, probe)
            result.probe = probe.name
            for fmt in usable:
                ratio = energies[fmt.name] / energies[probe.name] if energies[probe.name] > 0 else 0.0
                measured = fmt is probe
                result.costs[fmt.name] = Cost(
                    fmt.name,
                    unit.nbytes(fmt),
                    score.kl if measured else score.kl * ratio,
                    measured,
                    score.top1 if measured else None,
                    energies[fmt.name],
                )
        say(f"  sensitivity {number}/{len(units)} {unit.name}: " + _summary(result))
        results.append(result)
    return results, time.perf_counter() - started


def calibrate(
    model: Any, runner: Runner, results: list[Sensitivity], weights: QuantizedWeights
) -> list[dict[str, float]]:
    """Per unit, KL alone per format with a second point measured: the finest predicted format (least energy).

    KL ~ energy misses a floor: in bf16 any perturbation moves the downstream roundings, and an engine that rounds a
    matmul's input (llama.cpp's Q8_0 / Q8_K) adds that rounding whatever the weight's format. The other predicted
    formats are interpolated linearly in energy between the two measured points."""
    calibrated = []
    for result in results:
        kls = {name: c.kl for name, c in result.costs.items()}
        probe = result.costs.get(result.probe) if result.probe else None
        predicted = [c for c in result.costs.values() if not c.measured and c.energy is not None]
        if probe is not None and probe.energy and predicted:
            finest = min(predicted, key=lambda c: c.energy or 0.0)
            with quantized(model, {result.unit: FORMATS[finest.format]}, weights):
                low = runner.score(start_layer(result.unit, runner)).kl
            span = probe.energy - (finest.energy or 0.0)
            slope = max(probe.kl - low, 0.0) / span if span > 0 else 0.0
            for c in predicted:
                kls[c.format] = low + slope * ((c.energy or 0.0) - (finest.energy or 0.0))
        calibrated.append(kls)
    return calibrated


def unit_module(model: Any, unit: Unit) -> Any:
    """The smallest module holding all of the unit's tensors (a projection, fused or not, or an experts block)."""
    common: list[str] = []
    for parts in zip(*(t.name.split(".")[:-1] for t in unit.tensors)):
        if len(set(parts)) != 1:
            break
        common.append(parts[0])
    return model.get_submodule(".".join(common))


def unit_modules(model: Any, units: list[Unit]) -> list[Any]:
    return [unit_module(model, u) for u in units if u.kind != "embedding" and u.kind != "head"]


def _energies(
    model: Any, runner: Runner, unit: Unit, usable: list[Format], weights: QuantizedWeights
) -> tuple[dict[str, float], Format]:
    """Each format's error energy, and the probe: the most energy (the fewest bytes among equals). Only the probe's
    weights stay cached (it is measured next)."""
    energies: dict[str, float] = {}
    probe: Format | None = None
    roundings: dict[tuple[Any, int], Rounding] = {}  # the module's recorded inputs rounded, per activation function
    for fmt in usable:
        energies[fmt.name] = _energy(model, runner, unit, fmt, weights, roundings)
        if probe is None or (energies[fmt.name], -unit.nbytes(fmt)) > (energies[probe.name], -unit.nbytes(probe)):
            if probe is not None:
                weights.drop(unit, probe)
            probe = fmt
        else:
            weights.drop(unit, fmt)
    assert probe is not None  # usable is not empty
    return energies, probe


def _energy(
    model: Any,
    runner: Runner,
    unit: Unit,
    fmt: Format,
    weights: QuantizedWeights,
    roundings: dict[tuple[Any, int], Rounding],
) -> float:
    if unit.kind == "embedding":
        return _lookup_energy(runner, unit, fmt, weights)
    per_token = all(fmt.resolve(t.shape).activation_per_token for t in unit.tensors)
    with quantized(model, {unit: fmt}, weights, roundings):
        return runner.module_delta(unit_module(model, unit), per_token)


def _lookup_energy(runner: Runner, unit: Unit, fmt: Format, weights: QuantizedWeights) -> float:
    """Squared change of the embedding rows the prompts look up (an untied embedding feeds layer 0 only)."""
    import torch

    tokens = torch.tensor([t for seq in runner.sequences for t in seq])
    tensor = unit.tensors[0]
    rows, where = tokens.unique(return_inverse=True)
    original = weights.original(tensor)[rows]
    if weights.has(tensor, fmt) or tensor.transposed or not fmt.row_local:
        changed = weights.get(tensor, fmt)[rows]
    else:  # only the looked-up rows: a format whose blocks lie within a row rounds them as in the whole tensor
        changed = fmt.quantize(original.float()).to(original.dtype)
    delta = (changed.float() - original.float())[where]
    return float((delta * delta).sum())


def _weight_outlier(unit: Unit) -> float:
    import torch

    peak = 0.0
    for tensor in unit.tensors:
        w = tensor.param.detach()
        # Accumulated in float32 without a float32 copy of the weight.
        rms = float(torch.linalg.vector_norm(w, dtype=torch.float32)) / max(w.numel(), 1) ** 0.5
        if rms > 0:
            low, high = torch.aminmax(w)
            peak = max(peak, max(-float(low), float(high)) / rms)
    return peak


def _activation_outlier(model: Any, runner: Runner, unit: Unit) -> float | None:
    ratios = [runner.input_outlier(m) for m in matmul_modules(model, [unit])]
    known = [r for r in ratios if r is not None]
    return max(known) if known else None


def _summary(result: Sensitivity) -> str:
    parts = [f"{c.format} {c.kl:.2e}{'' if c.measured else '~'}" for c in result.costs.values() if c.format != BF16]
    return ", ".join(parts) or "no format applies"
