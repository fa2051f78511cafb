"""The sweep's scoring: KL(reference || candidate) and top-1 agreement, with the reference's chunks kept or not."""

from __future__ import annotations

import math
import sys

import pytest
import torch

from onboard.quantize import forward
from tests.tiny.fixtures import tiny_checkpoint  # noqa: F401  (session fixture)


def test_kl_by_hand_on_two_tokens() -> None:
    reference = torch.tensor([[0.0, math.log(3.0)], [2.0, 0.0]])  # p = (1/4, 3/4), argmax 1; then argmax 0
    candidate = torch.tensor([[0.0, 0.0], [0.0, 1.0]])  # q = (1/2, 1/2), argmax 0 (first of equals); then 1
    p = torch.tensor([0.25, 0.75])
    first = float((p * (p.log() - torch.tensor([0.5, 0.5]).log())).sum())
    p2, q2 = reference[1].softmax(-1), candidate[1].softmax(-1)
    second = float((p2 * (p2.log() - q2.log())).sum())
    kl, same = forward.kl_top1(reference, candidate)
    assert kl == pytest.approx(first + second, rel=1e-6)
    assert same == 0
    assert forward.kl_top1(reference, reference.clone()) == (pytest.approx(0.0, abs=1e-7), 2)


def test_kept_reference_chunks_give_the_same_values() -> None:
    g = torch.Generator().manual_seed(0)
    rows = forward.kl_chunk_rows(300) * 2 + 17  # several chunks and a partial one
    reference = (torch.randn(rows, 300, generator=g) * 3).bfloat16()
    candidate = (reference.float() + 0.05 * torch.randn(rows, 300, generator=g)).bfloat16()
    kept = list(forward._reference_chunks(reference))
    assert len(kept) == 3
    assert forward.kl_top1(reference, candidate, kept) == forward.kl_top1(reference, candidate)
    kl, same = forward.kl_top1(reference, candidate, kept)
    assert 0 < kl and 0 < same < rows


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt: checked on Linux (CI)")
def test_the_allocator_keeps_freed_memory_on_glibc() -> None:
    assert forward.hold_freed_memory() is True


@pytest.mark.parametrize("name", ["q4_k", "q6_k", "q8_0", "mxfp4", "q4_0", "int8", "fp8"])
def test_embedding_energy_from_the_looked_up_rows_equals_the_whole_tensor(name: str) -> None:
    """The sweep quantizes only the rows the prompts look up when the format rounds each row on its own; the energy
    must be what quantizing the whole embedding gives (fp8 per-tensor is not row-local: the whole tensor is used)."""
    from types import SimpleNamespace

    from onboard.quantize.apply import QuantizedWeights
    from onboard.quantize.formats import FORMATS
    from onboard.quantize.sensitivity import _lookup_energy
    from onboard.quantize.units import Tensor, Unit

    g = torch.Generator().manual_seed(1)
    weight = torch.nn.Parameter((torch.randn(64, 512, generator=g) * 0.02).bfloat16(), requires_grad=False)
    unit = Unit("embedding", None, "embedding", [Tensor("model.embed_tokens.weight", weight)])
    runner = SimpleNamespace(sequences=[(3, 5, 3, 60), (5, 7, 7, 7, 1)])
    fmt = FORMATS[name]
    ours = _lookup_energy(runner, unit, fmt, QuantizedWeights())  # type: ignore[arg-type]
    whole = QuantizedWeights().get(unit.tensors[0], fmt)
    tokens = torch.tensor([t for s in runner.sequences for t in s])
    delta = whole[tokens].float() - weight[tokens].float()
    assert ours == float((delta * delta).sum()) > 0
    assert fmt.row_local == (name != "fp8")


def test_a_format_is_swapped_in_and_the_original_tensor_swapped_back() -> None:
    """`quantized` puts the format's weights in as the Parameter's data and puts the very same original tensor back
    (no clone, no copy): values bit-identical after, also when the block raises."""
    from onboard.quantize.apply import QuantizedWeights, quantized
    from onboard.quantize.formats import FORMATS
    from onboard.quantize.units import Tensor, Unit

    g = torch.Generator().manual_seed(2)
    linear = torch.nn.Linear(256, 64, bias=False).to(torch.bfloat16)
    linear.weight.requires_grad_(False)
    linear.weight.copy_(torch.randn(64, 256, generator=g) * 0.02)
    unit = Unit("layer.0.mlp.down", 0, "mlp", [Tensor("layer.0.down.weight", linear.weight)])
    before, pointer = linear.weight.detach().clone(), linear.weight.data_ptr()
    weights = QuantizedWeights()
    x = torch.randn(3, 256, generator=g).bfloat16()
    with quantized(linear, {unit: FORMATS["q4_0"]}, weights):
        assert torch.equal(linear.weight, weights.get(unit.tensors[0], FORMATS["q4_0"]))
        assert not torch.equal(linear.weight, before)
        inside = linear(x)
    assert linear.weight.data_ptr() == pointer and torch.equal(linear.weight, before)
    assert not torch.equal(inside, linear(x))  # the forward inside saw the quantized weights
    with pytest.raises(RuntimeError), quantized(linear, {unit: FORMATS["q8_0"]}, weights):
        raise RuntimeError("a failing measurement")
    assert linear.weight.data_ptr() == pointer and torch.equal(linear.weight, before)
    assert weights.used > 0
    weights.drop(unit, FORMATS["q4_0"])
    weights.drop(unit, FORMATS["q8_0"])
    weights.drop(unit, FORMATS["q8_0"])  # dropping what is not kept is a no-op
    assert weights.used == 0 and not weights.has(unit.tensors[0], FORMATS["q4_0"])


def test_a_kept_rounding_is_reused_by_formats_that_round_inputs_alike() -> None:
    """The sweep's energies rerun a unit's module from the same recorded input once per format: with `roundings`
    kept across the blocks, an input is rounded once per activation function, and every output is bit-identical
    to rounding it afresh; a changed input (its version counter moved) is rounded again."""
    import dataclasses

    from onboard.quantize.apply import QuantizedWeights, quantized
    from onboard.quantize.formats import FORMATS
    from onboard.quantize.units import Tensor, Unit

    calls = []

    def counted(x: torch.Tensor) -> torch.Tensor:
        calls.append(x.shape)
        return FORMATS["q8_0"].activation(x)  # type: ignore[misc]

    same_rounding = [dataclasses.replace(FORMATS[n], activation=counted) for n in ("q8_0", "q4_0", "q5_1")]
    g = torch.Generator().manual_seed(3)
    linear = torch.nn.Linear(256, 64, bias=False).to(torch.bfloat16)
    linear.weight.requires_grad_(False)
    linear.weight.copy_(torch.randn(64, 256, generator=g) * 0.02)
    unit = Unit("layer.0.mlp.down", 0, "mlp", [Tensor("layer.0.down.weight", linear.weight)])
    x = torch.randn(5, 256, generator=g).bfloat16()
    weights, kept = QuantizedWeights(), {}
    shared, fresh = [], []
    for fmt in same_rounding:
        with quantized(linear, {unit: fmt}, weights, kept):
            shared.append(linear(x))
        with quantized(linear, {unit: fmt}, weights):
            fresh.append(linear(x))
    assert len(calls) == 1 + len(same_rounding)  # once kept, then once per block that keeps nothing
    assert all(torch.equal(a, b) for a, b in zip(shared, fresh))
    assert not torch.equal(shared[0], shared[1])  # the weights differ: only the input's rounding is shared
    x.mul_(2)  # in place: the kept rounding is stale
    with quantized(linear, {unit: same_rounding[0]}, weights, kept):
        again = linear(x)
    with quantized(linear, {unit: same_rounding[0]}, weights):
        assert torch.equal(again, linear(x))
    assert len(calls) == 3 + len(same_rounding)


def test_token_wise_modules_are_joined_and_token_mixing_ones_are_not() -> None:
    """An error energy reruns a module that maps each token on its own once over every prompt's tokens: checked on
    the recorded outputs, not assumed. A module that mixes neighbouring tokens (a time shift) keeps one run per
    prompt; the joined energy equals the per-prompt one; the per-prompt records become views of the joined ones."""

    class Shift(torch.nn.Module):  # each token plus its predecessor: joining prompts would mix them at the seam
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + torch.nn.functional.pad(x, (0, 0, 1, 0))[..., :-1, :]

    g = torch.Generator().manual_seed(4)
    # float32: the join is dtype-blind, and a bf16 matmul may round differently with the row count on some CPUs
    linear, shift = torch.nn.Linear(64, 32), Shift()
    runner = forward.Runner(torch.nn.Sequential(linear), [], hf=False)
    prompts = [torch.randn(1, n, 64, generator=g) for n in (5, 9, 3)]
    for module in (linear, shift):
        with torch.no_grad():
            runner._module_io[id(module)] = [((x,), {}, module(x)) for x in prompts]
    runner._join_token_wise([linear, shift])
    assert id(linear) in runner._joined and id(shift) not in runner._joined
    joined_input = runner._joined[id(linear)][0]
    assert all(args[0].untyped_storage().data_ptr() == joined_input.untyped_storage().data_ptr()
               for args, _, _ in runner._module_io[id(linear)])  # fmt: skip
    with torch.no_grad():
        linear.weight.add_(0.01)
    together, alone = runner.module_delta(linear), runner.module_delta(linear, per_token=False)
    assert together > 0 and together == pytest.approx(alone, rel=1e-4)
    assert runner.module_delta(shift) == 0.0  # unchanged module, run per prompt


def test_only_a_per_tensor_activation_scale_keeps_prompts_apart() -> None:
    from onboard.quantize.formats import CANDIDATES, FORMATS

    assert [n for n in CANDIDATES if not FORMATS[n].activation_per_token] == ["fp8"]


@pytest.mark.needs("llamacpp")  # every candidate format: Q3_K and IQ4_NL round only in llama.cpp's own library
def test_the_sweep_keeps_no_weights_once_measured(tiny_checkpoint) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    """Every format's weights are dropped once the unit is measured (fresh memory is the sweep's dearest cost), and
    every weight is the model's own tensor again afterwards."""
    from transformers import AutoModelForCausalLM

    from onboard.quantize.apply import QuantizedWeights
    from onboard.quantize.formats import CANDIDATES, FORMATS
    from onboard.quantize.sensitivity import matmul_modules, sweep, unit_modules
    from onboard.quantize.units import find_units

    model = AutoModelForCausalLM.from_pretrained(
        tiny_checkpoint("llama"), dtype=torch.bfloat16, trust_remote_code=False
    ).eval()
    pointers = {name: p.data_ptr() for name, p in model.named_parameters()}
    units, _ = find_units(model)
    runner = forward.Runner(model, [list(range(3, 40)), list(range(50, 70))], hf=True)
    runner.record_reference(matmul_modules(model, units), unit_modules(model, units))
    weights = QuantizedWeights()
    results, _ = sweep(model, runner, units, [FORMATS[n] for n in CANDIDATES], weights, lambda _m: None)
    assert weights.used == 0
    assert {name: p.data_ptr() for name, p in model.named_parameters()} == pointers
    assert all(any(c.measured and c.kl > 0 for n, c in r.costs.items() if n != "bf16") for r in results)
