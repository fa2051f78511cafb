"""The day-zero checklist: its YAML, ticking from stage results and sign-offs, and the rendered Markdown."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from onboard.errors import InputError
from onboard.inspect_checkpoint.verdicts import inspect_checks
from onboard.promote import evaluate_revision, load_checklist, load_signoffs, load_stage_results, record_signoff
from onboard.promote.checklist import evaluate, render_checklist_md
from tests.ci import missing
from tests.promote.workspaces import REV_A, SLUG, make_workspace

# The contract with the other stages: the exact check names each must emit. A rename must change this on purpose.
EXPECTED_CHECKS = {
    "inspect": ["inspect_no_errors", "architecture_no_novelty", "config_lint_clean"],
    "generate": ["adapter_imports", "adapter_parity", "kernels_implemented"],
    "verify-tokenizer": ["tokenizer_parity", "chat_template_parity"],
    "golden": ["goldens_recorded", "goldens_match_promoted"],
    "validate": ["logit_parity", "greedy_parity", "determinism_repeat", "determinism_padding", "determinism_batch",
                 "nan_inf_scan", "degeneration", "logit_scale", "long_context_parity", "performance_recorded",
                 "stop_set", "speculative_equivalence", "tool_calls"],
    "draft-check": ["draft_acceptance_measured"],
}  # fmt: skip


def state_for(rev_dir: Path, previously_promoted: bool = False, golden_sha: str | None = None):
    return evaluate(
        load_checklist(), load_stage_results(rev_dir), load_signoffs(rev_dir), slug=SLUG, revision=REV_A,
        previously_promoted=previously_promoted, promoted_golden_sha256=golden_sha,
    )  # fmt: skip


def status(state, item_id: str) -> str:
    return next(it.status for it in state.items if it.id == item_id)


def test_day_zero_yaml_links_every_item_to_the_stage_check_names():
    checklist = load_checklist()
    assert {k: sorted(v) for k, v in checklist.check_names().items()} == {
        k: sorted(v) for k, v in EXPECTED_CHECKS.items()
    }
    ids = {it.id for it in checklist.items}
    for wanted in ("architecture_reviewed", "config_lint", "adapter_parity", "kernels_implemented",
                   "tokenizer_verified", "template_verified", "stop_set", "goldens_recorded", "serving_parity",
                   "determinism", "long_context", "performance_recorded", "licence_reviewed", "model_card_read"):  # fmt: skip
        assert wanted in ids
    manual = {it.id for it in checklist.items if it.signoff == "only"}
    assert {"licence_reviewed", "model_card_read"} <= manual


def test_all_passing_run_is_ready(tmp_path):
    state = state_for(make_workspace(tmp_path))
    assert state.ready, [(it.id, it.status, it.evidence) for it in state.blocking]
    assert status(state, "goldens_match_promoted") == "not_applicable"
    assert status(state, "licence_reviewed") == "signed_off"
    assert status(state, "release_notes") == "open"  # optional: open but not blocking


def test_failed_and_missing_checks_block_with_evidence(tmp_path):
    rev = make_workspace(
        tmp_path,
        failing={"verify-tokenizer": ("tokenizer_parity",)},
        skip={"validate": ("long_context_parity",)},
        signoffs=("licence_reviewed",),
    )
    state = state_for(rev)
    blocking = {it.id: it for it in state.blocking}
    assert set(blocking) == {"tokenizer_verified", "long_context", "model_card_read"}
    assert blocking["tokenizer_verified"].status == "failed"
    assert "verify-tokenizer.json: tokenizer_parity FAILED" in blocking["tokenizer_verified"].evidence[0]
    assert blocking["long_context"].status == "open"
    assert "validate.json has no check 'long_context_parity'" in blocking["long_context"].evidence[0]


def test_missing_and_malformed_stage_files_leave_items_open(tmp_path):
    rev = make_workspace(tmp_path, stages=("generate", "verify-tokenizer", "golden"))
    (rev / "golden.json").write_text("{not json")
    state = state_for(rev)
    assert status(state, "serving_parity") == "open"
    ev = next(it for it in state.items if it.id == "goldens_recorded").evidence[0]
    assert "golden.json is unreadable" in ev
    assert next(it for it in state.items if it.id == "serving_parity").evidence == ("no validate result yet",)


def test_failing_required_check_on_no_item_still_blocks(tmp_path):
    rev = make_workspace(tmp_path)
    data = json.loads((rev / "validate.json").read_text())
    data["checks"].append({"name": "tool_call_parity", "passed": False, "required": True, "detail": "2/9 differ"})
    data["checks"].append({"name": "optional_thing", "passed": False, "required": False, "detail": ""})
    (rev / "validate.json").write_text(json.dumps(data))
    assert [it.id for it in state_for(rev).blocking] == ["validate:tool_call_parity"]


def test_signoff_waives_an_allowed_check_and_records_who(tmp_path):
    rev = make_workspace(tmp_path, novelty=("qwen3 + attention_sinks", "tensors not in qwen3: sinks"))
    assert status(state_for(rev), "architecture_reviewed") == "failed"
    record_signoff(rev, "architecture_reviewed", "carol", note="sinks handled by the attention block")
    state = state_for(rev)
    item = next(it for it in state.items if it.id == "architecture_reviewed")
    assert item.status == "signed_off"
    assert "signed off by carol" in item.evidence[-1] and "sinks handled" in item.evidence[-1]
    assert state.ready


def test_signoff_refuses_check_only_items_unknown_items_and_reasonless_waivers(tmp_path):
    rev = make_workspace(tmp_path)
    with pytest.raises(InputError, match="cannot stand in"):
        record_signoff(rev, "serving_parity", "dave")
    with pytest.raises(InputError, match="no checklist item 'licence'") as exc:
        record_signoff(rev, "licence", "dave")
    assert "licence_reviewed" in (exc.value.hint or "")
    with pytest.raises(InputError, match="needs a reason"):
        record_signoff(rev, "config_lint", "dave")
    with pytest.raises(InputError, match="--by is empty"):
        record_signoff(rev, "model_card_read", "  ")


def test_concurrent_signoffs_all_land(tmp_path):
    rev = make_workspace(tmp_path, signoffs=())
    code = (
        "import sys; from pathlib import Path; from onboard.promote import record_signoff\n"
        "for i in range(8): record_signoff(Path(sys.argv[1]), 'release_notes', sys.argv[2] + str(i), 'n')\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(rev), who]) for who in ("p", "q")]
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    assert len(load_signoffs(rev)) == 16


def test_new_revision_needs_goldens_compared_against_the_promoted_ones(tmp_path):
    rev = make_workspace(tmp_path, skip={"golden": ("goldens_match_promoted",)})
    assert status(state_for(rev, previously_promoted=False), "goldens_match_promoted") == "not_applicable"
    assert status(state_for(rev, previously_promoted=True), "goldens_match_promoted") == "open"
    rev = make_workspace(tmp_path / "b")
    data = json.loads((rev / "golden.json").read_text())
    (rev / "golden.json").write_text(json.dumps({**data, "promoted_golden_sha256": "aa" * 32}))
    assert status(state_for(rev, True, golden_sha="aa" * 32), "goldens_match_promoted") == "done"
    stale = state_for(rev, True, golden_sha="bb" * 32)
    assert status(stale, "goldens_match_promoted") == "open"
    assert "compared against goldens aaaaaaaaaaaa" in stale.blocking[0].evidence[0]


def test_inspect_checks_derived_from_profile_findings():
    profile = {
        "closest_family": "qwen3",
        "novelty": ["qwen3"],
        "findings": [
            {"code": "config-unknown-field", "severity": "warning", "message": "unknown field foo"},
            {"code": "header-past-eof", "severity": "fatal", "message": "shard 2 truncated"},
        ],
    }
    checks = {c.name: c for c in inspect_checks(profile)}
    assert not checks["inspect_no_errors"].passed and "header-past-eof" in checks["inspect_no_errors"].detail
    assert not checks["config_lint_clean"].passed and "unknown field foo" in checks["config_lint_clean"].detail
    assert checks["architecture_no_novelty"].passed
    none = {c.name: c for c in inspect_checks({"closest_family": None, "novelty": ["no known family"]})}
    assert not none["architecture_no_novelty"].passed


def test_bad_checklist_yaml_names_the_file_and_item(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("items:\n  - {id: x, title: X, command: c, required: yes-please}\n")
    with pytest.raises(
        InputError, match=r"bad.yaml: item 'x': Expected `bool`, got `str` - at `\$\.items\[0\]\.required`"
    ):
        load_checklist(bad)
    bad.write_text(
        "items:\n  - {id: x, title: X, command: c, required: true, ticked_by: [{stage: deploy, check: y}]}\n"
    )
    with pytest.raises(InputError, match="bad ticked_by entry"):
        load_checklist(bad)
    bad.write_text("items: [\n")
    with pytest.raises(InputError, match="not valid YAML"):
        load_checklist(bad)


def test_rendered_markdown_has_statuses_evidence_and_filled_commands(tmp_path):
    rev = make_workspace(tmp_path, failing={"validate": ("logit_parity",)})
    ev = evaluate_revision(SLUG, tmp_path)
    md = ev.checklist_md.read_text()
    assert ev.checklist_md == tmp_path / "checklists" / f"{SLUG}.md"
    assert "**NOT ready: 1 required item(s) open**" in md
    assert "| ❌ | **Serving parity on the target hardware** (`serving_parity`) | yes | FAILED |" in md
    assert f"onboard signoff {SLUG} release_notes --by NAME" in md
    stored = json.loads((rev / "checklist.json").read_text())
    assert stored["blocking"] == ["serving_parity"] and stored["ready"] is False
    assert render_checklist_md(ev.state) == md


def _edit_validate(rev: Path, **changes) -> None:
    data = json.loads((rev / "validate.json").read_text())
    for name, fields in changes.items():
        if name == "performance":
            data["performance"] = fields
            continue
        next(c for c in data["checks"] if c["name"] == name).update(fields)
    (rev / "validate.json").write_text(json.dumps(data))


def test_a_skipped_check_never_ticks_only_not_applicable_does(tmp_path):
    rev = make_workspace(tmp_path)
    _edit_validate(
        rev,
        long_context_parity={"passed": True, "required": False, "skipped": True, "not_applicable": True,
                             "detail": "not applicable: no window"},
        stop_set={"passed": False, "required": False, "skipped": True, "detail": "not checked: no stop tokens"},
    )  # fmt: skip
    state = state_for(rev)
    assert status(state, "long_context") == "not_applicable"
    assert status(state, "stop_set") == "open"
    assert "stop_set not checked — not checked: no stop tokens" in state.blocking[0].evidence[0]


def test_a_skipped_check_reported_as_passed_does_not_tick_its_item(tmp_path):
    """numerics_clean with nan_inf_scan and degeneration done but logit_scale skipped (too flat to estimate): open."""
    rev = make_workspace(tmp_path)
    _edit_validate(
        rev,
        logit_scale={"passed": True, "required": True, "skipped": True, "detail": "not checked: too flat"},
        long_context_parity={"passed": True, "required": False, "skipped": True, "detail": "not checked: capped"},
    )
    state = state_for(rev)
    assert status(state, "numerics_clean") == "open" and status(state, "long_context") == "open"
    numerics = next(it for it in state.items if it.id == "numerics_clean")
    assert "validate.json: logit_scale not checked — not checked: too flat" in numerics.evidence


def test_performance_recorded_is_derived_from_validate_performance(tmp_path):
    rev = make_workspace(tmp_path)
    item = next(it for it in state_for(rev).items if it.id == "performance_recorded")
    assert (
        item.status == "done" and "prefill at 5 lengths, TPOT 7.9 ms, ITL p99 11.2 ms on NVIDIA L4" in item.evidence[0]
    )
    _edit_validate(rev, performance=None)
    assert status(state_for(rev), "performance_recorded") == "failed"
    _edit_validate(rev, performance={"prefill_by_length": [], "tpot_ms": 3.0})
    assert status(state_for(rev), "performance_recorded") == "failed"


def test_real_demo_profile_ticks_the_inspect_items(tmp_path):
    demo = Path(__file__).resolve().parents[2] / "examples" / "demo-qwen3"
    if not (demo / "model.safetensors").is_file():
        missing("demo checkpoint not built (make demo / scripts/make_demo_checkpoint.py)")
    from onboard.inspect_checkpoint import inspect

    rev = tmp_path / "onboarding" / "demo-qwen3" / "local"
    rev.mkdir(parents=True)
    (rev / "profile.json").write_text(inspect(str(demo)).to_json())
    state = evaluate_revision("demo-qwen3", tmp_path)
    by_id = {it.id: it for it in state.state.items}
    for item in ("checkpoint_clean", "architecture_reviewed", "config_lint"):
        assert by_id[item].status == "done", by_id[item].evidence
    assert by_id["serving_parity"].status == "open" and state.state.revision == "local"


def test_tokenizer_checks_derived_from_a_findings_only_report(tmp_path):
    rev = make_workspace(tmp_path)
    report = {"source": "x", "findings": [
        {"code": "double-bos", "severity": "error", "message": "template adds BOS and so does the tokenizer"},
        {"code": "reference-failed", "severity": "warning", "message": "tiktoken missing"},
    ]}  # fmt: skip
    (rev / "verify-tokenizer.json").write_text(json.dumps(report))
    state = state_for(rev)
    assert status(state, "tokenizer_verified") == "done"
    assert status(state, "template_verified") == "failed"
    assert "double-bos: template adds BOS" in next(it for it in state.items if it.id == "template_verified").evidence[0]
    report["findings"].append({"code": "eos-config-disagreement", "severity": "error", "message": "eos differs"})
    (rev / "verify-tokenizer.json").write_text(json.dumps(report))
    assert "verify-tokenizer:declared_stop_set" in [it.id for it in state_for(rev).blocking]
