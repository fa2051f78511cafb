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
