"""Parity of every committed adapter with transformers (eager) on its tiny checkpoint: max|Δlogit| / max|logit| ≤ 1e-4
in float32 on prompts of 5, 19 and 48 tokens (48 > 2 × the 16-token window); in bfloat16 within stated multiples of
transformers' own bf16 error (see onboard/generate_adapter/parity.py)."""

from __future__ import annotations

import pytest

from onboard.generate_adapter.parity import LOW_PRECISION_MULTIPLES, TOLERANCES, check_parity, low_precision_verdict
from onboard.generate_adapter.regenerate import ADAPTERS_DIR
from tests.generate.conftest import REQUIRED_ARCHS


@pytest.mark.parametrize("model_type", REQUIRED_ARCHS)
def test_float32_parity(tiny, model_type: str) -> None:
    report = check_parity(ADAPTERS_DIR / f"{model_type}.py", tiny(model_type))
    print(f"{model_type}: {report['detail']}")
    assert max(p["length"] for p in report["prompts"]) > 2 * 16, "a prompt must outrun the sliding window"
    assert report["passed"], f"{model_type}: {report['detail']}"
    assert report["worst"] <= TOLERANCES["float32"]


@pytest.mark.parametrize("model_type", REQUIRED_ARCHS)
def test_bfloat16_error_within_a_stated_multiple_of_transformers_own(tiny, model_type: str) -> None:
    """Every committed adapter in bf16 stays within LOW_PRECISION_MULTIPLES of transformers' own bf16 error, both
    measured against transformers float32 on this machine (no fixed floor: the yardstick moves with the CPU)."""
    report = check_parity(ADAPTERS_DIR / f"{model_type}.py", tiny(model_type, "bfloat16"), dtype="bfloat16")
    print(f"{model_type}: {report['detail']}")
    assert report["reference_worst"] is not None and report["reference_worst"] > 0
    assert report["passed"], f"{model_type}: {report['detail']}"


def test_low_precision_verdict_fails_beyond_the_stated_multiples() -> None:
    import torch

    theirs = torch.linspace(1e-3, 2e-3, 100, dtype=torch.float64)
    assert low_precision_verdict(theirs * 1.4, theirs, moe=False)[0]
    assert not low_precision_verdict(theirs * (LOW_PRECISION_MULTIPLES["median"] + 0.1), theirs, moe=False)[0]
    spiked = theirs.clone()
    spiked[5] = theirs.max() * (LOW_PRECISION_MULTIPLES["max"] + 0.5)
    assert not low_precision_verdict(spiked, theirs, moe=False)[0], "a dense model's outlier position must fail"
    assert low_precision_verdict(spiked, theirs, moe=True)[0], "one router flip more than transformers is rounding"
    many = theirs.clone()
    many[::10] = theirs.max() * 5  # ten routing-affected positions: a router rounding where its reference does not
    verdict = low_precision_verdict(many, theirs, moe=True)
    assert not verdict[0] and "routing-affected positions 10 vs transformers 0" in verdict[1]


def test_moe_router_stays_float32_in_a_bf16_adapter(tiny) -> None:
    """The regression behind issue 10: a bf16 adapter rounded DeepSeek-V3's float32 router weight and correction
    bias to bf16 (transformers keeps them float32), which flipped experts on near-ties on some CPUs."""
    import torch

    from onboard.blocks.moe import MoE
    from onboard.generate_adapter.parity import load_adapter

    model = load_adapter(ADAPTERS_DIR / "deepseek_v3.py").Model.from_pretrained(
        tiny("deepseek_v3", "bfloat16"), dtype=torch.bfloat16
    )
    routers = [m for m in model.modules() if isinstance(m, MoE)]
    assert routers
    for moe in routers:
        assert moe.router.weight.dtype == torch.float32
        assert moe.e_score_correction_bias.dtype == torch.float32
        assert moe.experts_gate_up.dtype == torch.bfloat16
