"""The adapter runtime (in process) against goldens: clean checkpoints pass, every seeded defect is caught by the
check that names it, and performance figures are reported."""

from __future__ import annotations

import shutil

import pytest

from onboard.validate_serving.run import validate
from onboard.validate_serving.runtime import load_candidate
from tests.validate.defects import DEFECTS

ARCHS = ("llama", "qwen3", "gemma2", "qwen3_moe")
# Which optional check groups a defect needs besides parity (parity always runs).
GROUPS = {"determinism_batch": frozenset({"determinism"}), "fp16_overflow": frozenset({"precision"})}


@pytest.mark.parametrize("kind", ARCHS)
def test_clean_adapter_passes_every_check(tiny, kind: str) -> None:
    candidate = load_candidate(tiny.checkpoint(kind), "float32")
    assert candidate.info.kind == "adapter", candidate.capabilities.notes
    result = validate(tiny.golden(kind), candidate, performance=(kind == "llama"))
    assert result["passed"], [c for c in result["checks"] if c["required"] and not c["passed"]]
    names = {c["name"] for c in result["checks"]}
    assert {"logit_parity", "long_context_parity", "logit_scale", "greedy_parity", "determinism_repeat",
            "determinism_batch", "degeneration", "stop_set", "nan_inf_scan", "fp16_overflow"} <= names  # fmt: skip
    # The adapter takes padded batches: the target alone vs left- and right-padded among longer prompts.
    padding = next(c for c in result["checks"] if c["name"] == "determinism_padding")
    assert padding["passed"] and not padding["skipped"] and padding["required"], padding["detail"]
    data = result["check_data"]["determinism_padding"]
    assert data["arrangements"] == 4 and data["max_difference"] <= data["tolerance"]
    assert result["positions"] and {"prompt", "index", "kl", "max_logprob_error", "top1_agree"} == set(
        result["positions"][0]
    )
    if kind == "llama":
        perf = result["performance"]
        assert [p["tokens"] for p in perf["prefill_by_length"]][:2] == [16, 64]
        assert all(p["ms"] > 0 for p in perf["prefill_by_length"])
        assert perf["tpot_ms"] > 0 and perf["itl_p99_ms"] >= perf["itl_p50_ms"] > 0
        assert perf["throughput_tok_s_b1"] > 0 and perf["throughput_tok_s_bN"] > 0
        assert perf["peak_memory_bytes"] > 0 and perf["dtype"] == "float32" and "torch" in perf["versions"]


def test_reference_as_candidate_pads_both_ways(tiny) -> None:
    candidate = load_candidate(tiny.checkpoint("qwen3"), "float32", runtime="reference")
    assert candidate.info.kind == "reference-as-candidate"
    result = validate(tiny.golden("qwen3"), candidate, performance=False)
    padding = next(c for c in result["checks"] if c["name"] == "determinism_padding")
    assert padding["passed"] and not padding["skipped"]
    assert "adapter_runtime" in result["not_checked"]


@pytest.mark.parametrize("defect", DEFECTS, ids=[d.name for d in DEFECTS])
def test_seeded_defect_is_caught_by_its_check(tiny, defect, tmp_path) -> None:
    src = tiny.checkpoint(defect.model)
    path = defect.copy(src, tmp_path / defect.name) if defect.copy else src
    candidate = load_candidate(path, defect.dtype, wrap=defect.wrap)
    result = validate(
        tiny.golden(defect.model), candidate, performance=False, only=GROUPS.get(defect.check, frozenset())
    )
    assert not result["passed"]
    assert defect.check in result["failed"], result["failed"]
    check = next(c for c in result["checks"] if c["name"] == defect.check)
    assert check["detail"]


def test_fp16_overflow_is_not_flagged_in_float32(tiny) -> None:
    """The hot checkpoint is fine where its range allows: the defect is serving it in float16 (B39)."""
    result = validate(tiny.golden("llama_hot"), load_candidate(tiny.checkpoint("llama_hot"), "float32"), performance=False,
                      only=frozenset({"precision"}))  # fmt: skip
    assert result["passed"], result["failed"]


def test_golden_of_another_checkpoint_is_reported(tiny, tmp_path) -> None:
    shutil.copytree(tiny.checkpoint("qwen3"), tmp_path / "copy")
    result = validate(
        tiny.golden("qwen3"), load_candidate(tmp_path / "copy", "float32"), performance=False, only=frozenset()
    )
    assert result["passed"]
