"""The sweep's scoring: KL(reference || candidate) and top-1 agreement, with the reference's chunks kept or not."""

from __future__ import annotations

import math
import sys

import pytest
import torch

from onboard.quantize import forward


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
    rows = forward.KL_CHUNK * 2 + 17  # several chunks and a partial one
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
