"""`onboard new-model` on the bundled demo checkpoint: the whole chain, resume after a crash, seeded defects.

One cold run is shared by the tests of this module (it is the expensive part: goldens and validation).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from onboard import pipeline
from onboard.pipeline import run_new_model

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "examples" / "demo-qwen3"
# The demo template declares tools, which only a serving engine can check: waived with a note (README).
NOTES = {"tool_calls": "served without tools"}
STAGES = ["inspect", "generate", "verify-tokenizer", "golden", "validate"]


@pytest.fixture(scope="module")
def demo() -> Path:
    if not (DEMO / "model.safetensors").exists():
        subprocess.run([sys.executable, str(REPO / "scripts" / "make_demo_checkpoint.py")], check=True)
    return DEMO


@pytest.fixture(scope="module")
def clean_run(demo, tmp_path_factory):
    """Cold run in a fresh workspace, killed (SIGKILL) right after `verify-tokenizer`, then resumed."""
    ws = tmp_path_factory.mktemp("ws")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    crash = [sys.executable, str(REPO / "tests" / "faults.py"), "crash-after", "verify-tokenizer", "--"]
    crashed = subprocess.run(
        [*crash, "new-model", str(demo), "--workspace", str(ws)], capture_output=True, text=True, env=env, timeout=600
    )
    assert crashed.returncode == -9, crashed.stderr
    resumed = run_new_model(str(demo), workspace=ws, quiet=True)
    return ws, resumed


@pytest.mark.slow
def test_cold_run_reaches_a_decision(clean_run):
    ws, result = clean_run
    # Stages finished before the crash were not redone; the rest ran now.
    assert [result.stages[s]["outcome"] for s in STAGES] == ["cached", "cached", "cached", "ok", "ok"]
    assert result.stages["validate"]["passed"] is True
    # The decision: the manual sign-offs remain open (determinism runs on the adapter's padded batches), and the tool
    # calls: the template declares tools, and only a serving engine's parsers can be checked (validate --engine).
    assert set(result.blocking) == {"licence_reviewed", "model_card_read", "tool_calls"}
    for key in ("markdown", "html"):
        assert Path(result.report[key]).is_file()
    checklist = Path(result.checklist_md).read_text()
    assert "tokenizer" in checklist.lower() and "licence_reviewed" in checklist
    for name in ("profile.json", "generate.json", "verify-tokenizer.json", "golden.json", "validate.json",
                 "checklist.json", "report.html"):  # fmt: skip
        assert (result.run_dir / name).is_file(), name
    assert (ws / "golden_outputs" / "demo-qwen3" / "MANIFEST.json").is_file()


@pytest.mark.slow
def test_second_run_is_all_cached(clean_run, demo):
    ws, _ = clean_run
    again = run_new_model(str(demo), workspace=ws, quiet=True)
    assert [again.stages[s]["outcome"] for s in STAGES] == ["cached"] * 5


@pytest.mark.slow
def test_signoffs_then_promotion_decision(clean_run, demo):
    ws, _ = clean_run
    for item in ("licence_reviewed", "model_card_read", "tool_calls"):
        r = subprocess.run([sys.executable, "-m", "onboard", "signoff", "demo-qwen3", item, "--by", "tester",
                            "--note", f"demo: {NOTES.get(item, 'Apache-2.0 tokenizer')}", "--workspace", str(ws)],
                           capture_output=True, text=True)  # fmt: skip
        assert r.returncode == 0, r.stderr
    result = run_new_model(str(demo), workspace=ws, quiet=True, promote=True)
    # Every required item is ticked once the manual items are signed off and the engine-only tool calls waived
    # (tests/pipeline/test_demo_promotion.py does the same through `onboard promote` and the registry).
    assert result.blocking == []
    assert result.promoted is True


@pytest.mark.slow
def test_seeded_parity_defect_blocks_promotion(clean_run, demo, monkeypatch):
    """Logits ×10 keep every argmax: only a value-level comparison catches it, and the checklist must say so."""
    ws, result = clean_run
    original = pipeline.stages._generated_adapter

    def defective(ctx):
        candidate = original(ctx)
        model = candidate.model
        forward = model.forward

        def scaled(*args, **kwargs):
            return forward(*args, **kwargs) * 10.0

        model.forward = scaled
        return candidate

    monkeypatch.setattr(pipeline.stages, "_generated_adapter", defective)
    (result.run_dir / ".cache" / "validate.key").unlink()
    bad = run_new_model(str(demo), workspace=ws, quiet=True, promote=True)
    validate = json.loads((bad.run_dir / "validate.json").read_text())
    failed = {c["name"] for c in validate["checks"] if not c["passed"] and c.get("required", True)}
    assert {"logit_parity", "logit_scale"} <= failed
    assert "serving_parity" in bad.blocking and bad.promoted is False
    (result.run_dir / ".cache" / "validate.key").unlink()  # leave the workspace clean for other tests


@pytest.mark.slow
def test_seeded_tokenizer_defect_blocks_promotion(demo, tmp_path, monkeypatch):
    """generation_config.json declares an EOS the tokenizer does not use: the stop-set item must block."""
    broken = tmp_path / "demo-broken-eos"
    shutil.copytree(demo, broken)
    (broken / "generation_config.json").write_text(json.dumps({"eos_token_id": 151644, "bos_token_id": 151643}))
    # Goldens and validation are not what this test is about: stop after the tokenizer stage.
    monkeypatch.setattr(pipeline, "STAGES", tuple(s for s in pipeline.STAGES if s.name in
                                                  ("inspect", "generate", "verify-tokenizer")))  # fmt: skip
    result = run_new_model(str(broken), workspace=tmp_path / "ws", quiet=True, promote=True)
    tok = json.loads((result.run_dir / "verify-tokenizer.json").read_text())
    assert not tok["passed"]
    assert any(not c["passed"] for c in tok["checks"] if c["name"] in ("declared_stop_set", "tokenizer_parity"))
    assert {"stop_set"} & set(result.blocking) or {"tokenizer_verified"} & set(result.blocking), result.blocking
    assert result.promoted is False


@pytest.mark.slow
def test_new_revision_is_compared_with_earlier_goldens(clean_run, demo, tmp_path):
    """A changed checkpoint under the same name: its reference must match the goldens already recorded."""
    ws, _ = clean_run
    changed = tmp_path / "demo-qwen3"  # same folder name → same slug, different files → a new revision
    shutil.copytree(demo, changed)
    config = json.loads((changed / "config.json").read_text())
    config["rms_norm_eps"] = 0.5  # a silent config edit upstream: every logit moves
    (changed / "config.json").write_text(json.dumps(config))
    result = run_new_model(str(changed), workspace=ws, quiet=True)
    golden = json.loads((result.run_dir / "golden.json").read_text())
    match = next(c for c in golden["checks"] if c["name"] == "goldens_match_promoted")
    assert not match["passed"] and "logprob error" in match["detail"], match
    same = run_new_model(str(demo), workspace=ws, quiet=True)  # the original revision still matches its goldens
    assert same.stages["golden"]["outcome"] == "cached"


@pytest.mark.slow
def test_a_new_revision_is_judged_against_the_registry_it_is_given(demo, tmp_path):
    """Promoted into a registry of its own (not the workspace's default): new-model --registry ticks the new
    revision's checklist against that promotion, so the failed golden comparison blocks it there too."""
    from onboard.promote import promote, record_signoff

    ws, registry = tmp_path / "ws", tmp_path / "elsewhere" / "registry.sqlite3"
    first = run_new_model(str(demo), workspace=ws, quiet=True, registry=registry)
    for item in ("licence_reviewed", "model_card_read", "tool_calls"):
        record_signoff(first.run_dir, item, "tester", NOTES.get(item, ""))
    promote(first.slug, ws, registry=registry)
    changed = tmp_path / "next" / demo.name  # the same slug, other weights' config: a new revision
    shutil.copytree(demo, changed)
    config = json.loads((changed / "config.json").read_text())
    config["rms_norm_eps"] = 0.5
    (changed / "config.json").write_text(json.dumps(config))
    judged = run_new_model(str(changed), workspace=ws, quiet=True, registry=registry)
    assert "goldens_match_promoted" in judged.blocking, judged.blocking
    # The workspace's default registry holds no promotion: there the item is not applicable (first promotion).
    default = run_new_model(str(changed), workspace=ws, quiet=True)
    assert "goldens_match_promoted" not in default.blocking, default.blocking


@pytest.mark.slow
def test_a_crashing_stage_is_recorded_and_others_still_run(demo, tmp_path, monkeypatch):
    """A bug in one stage: its dependents are blocked, the independent stages run, the report says why."""

    def broken(ctx):
        raise RuntimeError("boom")

    stages = tuple(s if s.name != "verify-tokenizer" else type(s)(s.name, broken, s.outputs, s.needs, s.params)
                   for s in pipeline.STAGES if s.name in ("inspect", "generate", "verify-tokenizer"))  # fmt: skip
    monkeypatch.setattr(pipeline, "STAGES", stages)
    monkeypatch.delenv("ONBOARD_DEBUG", raising=False)
    result = run_new_model(str(demo), workspace=tmp_path / "ws", quiet=True)
    assert result.stages["verify-tokenizer"]["outcome"] == "error"
    assert "RuntimeError: boom" in result.stages["verify-tokenizer"]["detail"]
    assert result.stages["generate"]["outcome"] == "ok"  # independent of the failing stage
    recorded = json.loads((result.run_dir / "verify-tokenizer.json").read_text())
    assert recorded["passed"] is False and "boom" in recorded["error"]
    assert "tokenizer_verified" in result.blocking and Path(result.report["html"]).is_file()
