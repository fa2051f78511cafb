"""Parity of every committed adapter with transformers (eager) on its tiny checkpoint, judged by the one comparator
(onboard/comparator.py) against transformers' own run in the calibration dtype (float64 for float32, bfloat16 for
bfloat16) on prompts of 5, 19 and 48 tokens (48 > 2 × the 16-token window); max|Δlogit| / max|logit| ≤ 1e-4 in
float32 besides."""

from __future__ import annotations

import pytest

from onboard.comparator import ROUTING_FLIPS_ALLOWED, agreement, topk_rows
from onboard.generate_adapter.parity import check_parity
from onboard.generate_adapter.parity_power import LOW_POWER
from onboard.generate_adapter.regenerate import ADAPTERS_DIR
from tests.generate.conftest import REQUIRED_ARCHS

FLOAT32_MAX_RELATIVE = 1e-4
"""Besides the comparator's verdict: in float32 every adapter's max|Δlogit| / max|logit| stays under this."""


@pytest.mark.parametrize("model_type", REQUIRED_ARCHS)
def test_float32_parity(tiny, model_type: str) -> None:
    report = check_parity(ADAPTERS_DIR / f"{model_type}.py", tiny(model_type))
    print(f"{model_type}: {report['detail']}")
    assert max(p["length"] for p in report["prompts"]) > 2 * 16, "a prompt must outrun the sliding window"
    assert report["passed"], f"{model_type}: {report['detail']}"
    assert report["worst"] <= FLOAT32_MAX_RELATIVE


@pytest.mark.parametrize("model_type", REQUIRED_ARCHS)
def test_bfloat16_error_within_a_stated_multiple_of_transformers_own(tiny, model_type: str) -> None:
    """Every committed adapter in bf16 stays within LOW_PRECISION_MULTIPLES of transformers' own bf16 error, both
    measured against transformers float32 on this machine (no fixed floor: the yardstick moves with the CPU).
    bf16's own noise on a tiny random model may hide the power probes (parity_power): the comparison passes, and the
    result then says "passed, low power", naming the probe, never a plain pass."""
    report = check_parity(ADAPTERS_DIR / f"{model_type}.py", tiny(model_type, "bfloat16"), dtype="bfloat16")
    print(f"{model_type}: {report['detail']}")
    assert report["reference_worst"] is not None and report["reference_worst"] > 0
    assert report["status"] in ("passed", LOW_POWER), f"{model_type}: {report['detail']}"
    assert report["passed"] is (not report["power"]["missed"])
    if report["status"] == LOW_POWER:
        missed = ", ".join(report["power"]["missed"])
        assert report["detail"].startswith(f"passed, low power (would miss {missed})")


def test_agreement_passes_rounding_and_fails_a_scaled_adapter() -> None:
    """The shared verdict on trained-like logits (spread x4, peaked distributions) in bf16: another rounding of the
    same logits passes, logits x1.03 (a dropped or doubled multiplier: argmax unchanged) fails on the logit scale."""
    import torch

    g = torch.Generator().manual_seed(0)
    truth = [torch.randn(60, 400, generator=g) * 4 for _ in range(3)]
    nexts = [torch.randint(0, 400, (60,), generator=g).tolist() for _ in truth]

    def rows(logits: list[torch.Tensor], k: int) -> list:
        return [topk_rows(t, k, n) for t, n in zip(logits, nexts)]

    own = rows([t.bfloat16().float() for t in truth], 20)  # transformers' own bf16 run
    same = rows([(t * (1 + 2**-9)).bfloat16().float() for t in truth], 20)  # rounds at another point
    scaled = rows([(t * 1.03).bfloat16().float() for t in truth], 20)
    assert agreement("bfloat16", rows(truth, 10), same, [own], nexts).passed
    verdict = agreement("bfloat16", rows(truth, 10), scaled, [own], nexts)
    assert not verdict.passed and any("logit scale" in r for r in verdict.reasons), verdict.detail()

    # A routing flip: one position's runners-up move by 0.3 nats (where the top-1 margin keeps the top-1). An MoE model
    # may have a few of these beyond the reference's own runs; a dense model none, and an MoE model not
    # ROUTING_FLIPS_ALLOWED + 1.
    clear = [(p, i) for p, t in enumerate(truth) for i in range(len(t)) if float(t[i].topk(2).values.diff().abs()) > 2]

    def flipped(count: int) -> list:
        logits = [t.clone() for t in truth]
        for p, i in clear[:count]:
            top = logits[p][i].argmax()
            logits[p][i] += 0.3
            logits[p][i][top] -= 0.3
        return rows([t.bfloat16().float() for t in logits], 20)

    assert not agreement("bfloat16", rows(truth, 10), flipped(1), [own], nexts).passed
    assert agreement("bfloat16", rows(truth, 10), flipped(1), [own], nexts, moe=True).passed
    too_many = agreement("bfloat16", rows(truth, 10), flipped(ROUTING_FLIPS_ALLOWED + 1), [own], nexts, moe=True)
    assert not too_many.passed and too_many.verdict.routing_flips == ROUTING_FLIPS_ALLOWED, too_many.detail()


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
