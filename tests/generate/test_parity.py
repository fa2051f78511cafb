"""Parity of every committed adapter with transformers (eager, float32) on its tiny checkpoint, and bf16 on a few:
max|Δlogit| / max|logit| ≤ 1e-4 in float32 on prompts of 5, 19 and 48 tokens (48 > 2 × the 16-token window)."""

from __future__ import annotations

import pytest

from onboard.generate_adapter.parity import TOLERANCES, check_parity
from onboard.generate_adapter.regenerate import ADAPTERS_DIR
from tests.generate.conftest import REQUIRED_ARCHS


@pytest.mark.parametrize("model_type", REQUIRED_ARCHS)
def test_float32_parity(tiny, model_type: str) -> None:
    report = check_parity(ADAPTERS_DIR / f"{model_type}.py", tiny(model_type))
    print(f"{model_type}: {report['detail']}")
    assert max(p["length"] for p in report["prompts"]) > 2 * 16, "a prompt must outrun the sliding window"
    assert report["passed"], f"{model_type}: {report['detail']}"
    assert report["worst"] <= TOLERANCES["float32"]


@pytest.mark.parametrize("model_type", ["llama", "gemma2", "qwen3_moe", "deepseek_v3", "gpt_oss"])
def test_bfloat16_parity(tiny, model_type: str) -> None:
    report = check_parity(ADAPTERS_DIR / f"{model_type}.py", tiny(model_type, "bfloat16"), dtype="bfloat16")
    print(f"{model_type}: {report['detail']}")
    assert report["passed"], f"{model_type}: {report['detail']}"
