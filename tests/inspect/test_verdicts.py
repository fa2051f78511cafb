"""The inspect stage's checks (inspect_checkpoint/verdicts.py): one definition for the pipeline's inspect.json and the
checklist's reading of a profile.json."""

from __future__ import annotations

import json
from dataclasses import replace

from onboard.inspect_checkpoint.verdicts import inspect_checks
from onboard.promote.stage_results import load_stage_results


def _checks(**profile: object) -> dict[str, dict]:
    return {c.name: c.to_dict() for c in inspect_checks({"findings": [], **profile})}


def test_a_family_model_type_carrying_something_new_is_novelty() -> None:
    # The pipeline used to pass this when closest_family == model_type: a checkpoint that keeps qwen3's model_type
    # and adds attention sinks is exactly what a person must review.
    new = _checks(model_type="qwen3", closest_family="qwen3", novelty=["qwen3 + attention_sinks", "tensors not in "
                                                                        "qwen3: sinks"])  # fmt: skip
    assert (
        not new["architecture_no_novelty"]["passed"] and "attention_sinks" in new["architecture_no_novelty"]["detail"]
    )
    same = _checks(model_type="qwen3", closest_family="qwen3", novelty=["qwen3"])
    assert same["architecture_no_novelty"]["passed"]
    unknown = _checks(model_type="newlm", closest_family=None, novelty=["no known family to compare with"])
    assert not unknown["architecture_no_novelty"]["passed"]


def test_config_lint_counts_every_config_finding_above_info() -> None:
    findings = [{"code": "config-field-type", "severity": "warning", "message": "hidden_size is a string"},
                {"code": "config-kernel-fact", "severity": "info", "message": "clip_qkv = 8.0"},
                {"code": "wrapper-config-fields", "severity": "info", "message": "mm_tokens_per_image"}]  # fmt: skip
    checks = _checks(model_type="qwen3", closest_family="qwen3", novelty=["qwen3"], findings=findings)
    assert not checks["config_lint_clean"]["passed"] and "config-field-type" in checks["config_lint_clean"]["detail"]
    assert checks["inspect_no_errors"]["passed"]
    info_only = _checks(model_type="qwen3", closest_family="qwen3", novelty=["qwen3"], findings=findings[1:])
    assert info_only["config_lint_clean"]["passed"]


def test_the_checklist_derives_the_same_checks(tmp_path) -> None:
    profile = {"model_type": "qwen3", "closest_family": "qwen3", "novelty": ["qwen3 + moe"], "findings": []}
    (tmp_path / "profile.json").write_text(json.dumps(profile))
    derived = load_stage_results(tmp_path).get("inspect")
    assert derived is not None and [c.stage for c in derived.checks] == ["inspect"] * 3
    assert [replace(c, stage="") for c in derived.checks] == inspect_checks(profile)
