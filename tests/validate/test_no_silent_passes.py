"""No silent passes in validate: no candidate is an error, the reference is only an explicit, labelled self-check,
and goldens of another checkpoint are refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from onboard.errors import InputError
from onboard.promote.checklist import evaluate, load_checklist
from onboard.promote.stage_results import load_stage_results
from onboard.validate_serving.golden import record
from onboard.validate_serving.run import validate
from onboard.validate_serving.runtime import load_candidate
from tests.validate.test_cli_validate import onboard
from tests.validate.tiny_models import ORIGINAL_MAX, WINDOW, edit_config


def _no_adapter_checkpoint(out: Path) -> Path:
    """A tiny GPT-2: transformers knows it, onboard has no adapter for it (onboard/adapters/ has no gpt2)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model("gpt2", n_embd=64, n_layer=2, n_head=2, vocab_size=512, n_positions=128)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).save_pretrained(out)
    return out


def test_validate_without_a_candidate_is_an_error_not_a_self_comparison(tmp_path: Path) -> None:
    ckpt = _no_adapter_checkpoint(tmp_path / "gpt2-tiny")
    record(str(ckpt), tmp_path / "g", max_new_tokens=2, calibrate=(), max_long_tokens=16)
    out = onboard("validate", str(ckpt), "--golden", str(tmp_path / "g"), "--no-performance", cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert "Error:" in out.stderr and "nothing to validate" in out.stderr and "gpt2" in out.stderr
    assert "Hint:" in out.stderr and "--endpoint URL" in out.stderr and "--candidate reference" in out.stderr
    assert "PASSED" not in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "onboarding").exists()  # nothing written: no result to mistake for a pass


def test_reference_self_check_is_labelled_and_ticks_no_checklist_item(tiny, tmp_path: Path) -> None:
    ckpt = tiny.checkpoint("qwen3")
    out = onboard("validate", str(ckpt), "--golden", str(tiny.golden("qwen3").folder), "--candidate", "reference",
                  "--no-performance", "--json", "--out", str(tmp_path / "rev" / "validate.json"), cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["self_check"] is True and result["mode"].startswith("self-check: transformers against its own")
    assert result["candidate"]["kind"] == "reference-as-candidate" and "adapter_runtime" in result["not_checked"]
    summary = (tmp_path / "rev" / "validate.md").read_text()
    assert summary.startswith("validate SELF-CHECK: PASSED") and "no checklist item is ticked by it" in summary
    checklist = load_checklist()
    state = evaluate(checklist, load_stage_results(tmp_path / "rev"), [], slug="x", revision="rev")
    by_id = {it.id: it for it in state.items}
    validate_items = {it.id for it in checklist.items if any(r.stage == "validate" for r in it.ticked_by)}
    assert validate_items >= {"serving_parity", "stop_set", "numerics_clean", "determinism", "long_context"}
    for item in validate_items:
        assert by_id[item].status == "open", (item, by_id[item])
        assert any("self-check" in line for line in by_id[item].evidence), by_id[item].evidence


def test_adapter_result_still_ticks_items(tiny, tmp_path: Path) -> None:
    """The guard against self-checks is on the self-check, not on validate: the adapter's clean run ticks parity."""
    result = validate(tiny.golden("qwen3"), load_candidate(tiny.checkpoint("qwen3"), "float32"), performance=False,
                      checkpoint=tiny.checkpoint("qwen3"))  # fmt: skip
    assert result["self_check"] is False and result["passed"]
    identity = next(c for c in result["checks"] if c["name"] == "goldens_checkpoint")
    assert identity["passed"] and not identity["skipped"] and "fingerprint" in identity["detail"]
    (tmp_path / "rev").mkdir()
    (tmp_path / "rev" / "validate.json").write_text(json.dumps(result))
    state = evaluate(load_checklist(), load_stage_results(tmp_path / "rev"), [], slug="x", revision="rev")
    assert next(it for it in state.items if it.id == "serving_parity").status == "done"


def test_goldens_of_another_checkpoint_are_an_error(tiny, tmp_path: Path) -> None:
    golden = tiny.golden("llama")
    other = edit_config(tiny.checkpoint("llama"), tmp_path / "llama-eps", rms_norm_eps=1e-3)
    with pytest.raises(InputError, match="goldens of another checkpoint") as err:
        validate(golden, load_candidate(other, "float32"), performance=False, only=frozenset(), checkpoint=other)
    assert "onboard golden record" in (err.value.hint or "")
    out = onboard("validate", str(other), "--golden", str(golden.folder), "--no-performance", cwd=tmp_path)
    assert out.returncode == 2 and "goldens of another checkpoint" in out.stderr and "Hint:" in out.stderr
    assert "Traceback" not in out.stderr


def test_a_copy_of_the_same_checkpoint_matches_its_goldens(tiny, tmp_path: Path) -> None:
    """Content, not paths or modification times: a copied (or re-cloned) checkpoint keeps its goldens."""
    copy = tmp_path / "copy"
    shutil.copytree(tiny.checkpoint("qwen3"), copy)
    (copy / "README.md").write_text("a model card edit does not orphan the goldens\n")
    result = validate(tiny.golden("qwen3"), load_candidate(copy, "float32"), performance=False, only=frozenset(),
                      checkpoint=copy)  # fmt: skip
    assert result["passed"]
    assert next(c for c in result["checks"] if c["name"] == "goldens_checkpoint")["passed"]


def test_a_capped_long_prompt_is_not_checked_and_says_how_far_to_raise_the_cap(tiny, tmp_path: Path) -> None:
    """The tiny llama's original rope context is 64 tokens: a long prompt capped at 40 never crosses it."""
    golden = record(str(tiny.checkpoint("llama")), tmp_path / "g", max_new_tokens=2, calibrate=("float32",),
                    max_long_tokens=40)  # fmt: skip
    plan = golden.manifest["long_prompt"]
    assert plan["tokens"] == 40 and plan["uncrossed"] == {"original_max_position_embeddings": ORIGINAL_MAX + 48}
    result = validate(golden, load_candidate(tiny.checkpoint("llama"), "float32"), performance=False, only=frozenset())
    check = next(c for c in result["checks"] if c["name"] == "long_context_parity")
    assert check["skipped"] and not check["passed"] and not check["not_applicable"]
    assert f"raise --max-long-tokens to {ORIGINAL_MAX + 48} to cross the boundary at {ORIGINAL_MAX}" in check["detail"]
    (tmp_path / "rev").mkdir()
    (tmp_path / "rev" / "validate.json").write_text(json.dumps(result))
    state = evaluate(load_checklist(), load_stage_results(tmp_path / "rev"), [], slug="x", revision="rev")
    assert next(it for it in state.items if it.id == "long_context").status == "open"


def test_long_context_is_not_applicable_only_without_boundaries(tiny) -> None:
    result = validate(tiny.golden("qwen3"), load_candidate(tiny.checkpoint("qwen3"), "float32"), performance=False,
                      only=frozenset())  # fmt: skip
    check = next(c for c in result["checks"] if c["name"] == "long_context_parity")
    assert check["not_applicable"] and check["detail"].startswith("not applicable: the model has no sliding window")
    crossed = validate(tiny.golden("gemma2"), load_candidate(tiny.checkpoint("gemma2"), "float32"), performance=False,
                       only=frozenset())  # fmt: skip
    check = next(c for c in crossed["checks"] if c["name"] == "long_context_parity")
    assert check["passed"] and not check["skipped"] and f"sliding_window={WINDOW}" in check["detail"]


def test_long_plan_from_windows_chunks_and_original_context() -> None:
    from onboard.validate_serving.prompts import plan_long

    plan = plan_long({"attention_chunk": 8192, "original_max_position_embeddings": 32768}, 131072, 16, 4096)
    assert plan.tokens == 4096 and not plan.crossed
    assert plan.uncrossed == {"attention_chunk": 8192 + 48, "original_max_position_embeddings": 32768 + 48}
    beyond = plan_long({"sliding_window": 4096}, 4096, 16, 8192)  # the window is the whole context: nothing to cross
    assert beyond.beyond_context == {"sliding_window": 4096} and not beyond.uncrossed
    raised = plan_long({"sliding_window": 4096}, 131072, 16, 4200)
    assert raised.tokens == 4096 + 48 and raised.crossed == {"sliding_window": 4096}
