"""draft-check on the trained tiny reference and its trained draft (issue 15): greedy acceptance equals an
independent count by transformers' assisted generation, sum(min(p, q)) equals one computed from transformers'
distributions, and the compatibility findings (a different tokenizer, a few extra vocabulary rows)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TARGET, DRAFT = FIXTURES / "trained-qwen3", FIXTURES / "trained-qwen3-draft"
QWEN3_TOKENIZER = Path(__file__).resolve().parents[2] / "examples" / "tokenizer-qwen3"
CHECKED_KS = (2, 8)


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> dict:
    from onboard.speculative.check import Request, run

    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("draft-check")
    request = Request(str(TARGET), str(DRAFT), dtype="bfloat16", temperature=1.0, max_new_tokens=16, out=out)
    found = run(request, lambda _m: None)
    assert json.loads((out / "draft-check.json").read_text())["passed"] is True
    return found


def _hf(path: Path) -> object:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16, trust_remote_code=False).eval()


def test_greedy_acceptance_equals_transformers_assisted_generation(result: dict) -> None:
    """Per k, the accepted draft tokens over trajectories of >= 100 generated tokens equal transformers' count
    (generated tokens minus target forwards) within 1 token per 100 generated."""
    from onboard.speculative.acceptance import Windows, simulate

    target, draft = _hf(TARGET), _hf(DRAFT)
    target.generation_config.eos_token_id = None  # run to the trajectory's length (it may end on a stop token)
    draft.generation_config.num_assistant_tokens_schedule = "constant"
    draft.generation_config.assistant_confidence_threshold = 0.0  # never cut a window short on low confidence
    calls = [0]
    target.register_forward_pre_hook(lambda _m, _a: calls.__setitem__(0, calls[0] + 1))
    trajectories, total = [], 0
    for t in sorted(result["trajectories"], key=lambda t: len(t["prompt_ids"])):  # the shortest prompts that
        trajectories.append(t)  # make >= 100 generated tokens: the comparison is per trajectory, the sums of some
        total += len(t["continuation_ids"])
        if total >= 100:
            break
    assert total >= 100
    for k in CHECKED_KS:
        draft.generation_config.num_assistant_tokens = k
        ours = sum(simulate(Windows(tuple(t["greedy_runs"]), None), k)[1] for t in trajectories)
        theirs = 0
        for t in trajectories:
            prompt, cont = t["prompt_ids"], t["continuation_ids"]
            calls[0] = 0
            out = target.generate(torch.tensor([prompt]), max_new_tokens=len(cont), do_sample=False,
                                  assistant_model=draft, pad_token_id=0)  # fmt: skip
            assert out[0, len(prompt) :].tolist() == cont, t["name"]  # the same target trajectory
            theirs += len(cont) - calls[0]
        assert abs(ours - theirs) <= total / 100, (k, ours, theirs)
    accepted = {row["k"]: row["accepted"] for row in result["greedy"]["by_k"]}
    everything = sum(len(t["continuation_ids"]) for t in result["trajectories"])
    assert 0 < accepted[1] < accepted[8] < everything  # a real draft: neither all nor nothing accepted
    assert accepted[8] == sum(simulate(Windows(tuple(t["greedy_runs"]), None), 8)[1] for t in result["trajectories"])


def test_sampled_acceptance_is_sum_of_min_of_both_distributions(result: dict) -> None:
    target, draft = _hf(TARGET), _hf(DRAFT)
    values = []
    with torch.no_grad():
        for t in result["trajectories"]:
            seq = torch.tensor([t["prompt_ids"] + t["continuation_ids"]])
            rows = slice(len(t["prompt_ids"]) - 1, seq.shape[1] - 2)  # starts with room for one proposal
            p = torch.softmax(target(seq).logits[0, rows].float(), -1)
            q = torch.softmax(draft(seq).logits[0, rows].float(), -1)
            values += torch.minimum(p, q).sum(-1).tolist()
    sampled = result["sampled"]
    assert sampled["alpha"] == pytest.approx(
        sum(values) / len(values), abs=5e-4
    )  # bf16: adapter vs transformers (1.1e-4 measured)
    assert sampled["by_position"][0]["cumulative"] == pytest.approx(sampled["alpha"], abs=1e-9)
    assert result["greedy"]["alpha"] < sampled["alpha"] < 1


def test_speedup_and_recommendation_follow_the_measurements(result: dict) -> None:
    from onboard.speculative.acceptance import model_speedup

    c = result["cost"]["ratio"]
    assert 0 < c < 1  # the draft has 7% of the target's parameters
    greedy = result["greedy"]
    for row, speed in zip(greedy["by_k"], greedy["speedup"]):
        assert speed["measured"] == pytest.approx(row["tokens_per_step"] / (c * row["k"] + 1))
        assert speed["model"] == pytest.approx(model_speedup(greedy["alpha"], row["k"], c))
    best = max(greedy["speedup"], key=lambda r: r["measured"])
    assert greedy["recommended_k"] == (best["k"] if best["measured"] > 1 else None)
    measured_check = next(c for c in result["checks"] if c["name"] == "draft_acceptance_measured")
    assert f"recommended k {greedy['recommended_k'] or 'none (no k is faster)'}" in measured_check["detail"]
    positions = greedy["by_position"]
    assert [p["position"] for p in positions] == list(range(1, 9))
    assert positions[0]["cumulative"] == pytest.approx(greedy["alpha"])


def _first_difference(target: Path, draft: Path) -> str:
    """Independently: the first corpus string the two tokenizers encode differently (transformers directly)."""
    from transformers import AutoTokenizer

    from onboard.verify_tokenizer.corpus import STRESS, special_token_strings

    a = AutoTokenizer.from_pretrained(target, trust_remote_code=False)
    b = AutoTokenizer.from_pretrained(draft, trust_remote_code=False)
    for text in [*STRESS, *special_token_strings(list(a.all_special_tokens))]:
        if a.encode(text, add_special_tokens=False) != b.encode(text, add_special_tokens=False):
            return text
    raise AssertionError("the tokenizers agree on the whole corpus")


def test_different_tokenizer_is_incompatible_draft_naming_the_first_differing_string(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from onboard.cli import main

    draft = tmp_path / "other-tokenizer-draft"
    shutil.copytree(QWEN3_TOKENIZER, draft)
    shutil.copy2(DRAFT / "config.json", draft / "config.json")  # no weights needed: compatibility comes first
    expected = _first_difference(TARGET, draft)
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exit_info:
        main(["draft-check", str(TARGET), str(draft), "--out", str(out)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 1, err
    assert err.startswith("Error: incompatible-draft") and repr(expected) in err and "Hint: " in err
    written = json.loads((out / "draft-check.json").read_text())
    assert written["passed"] is False and written["findings"][0]["code"] == "incompatible-draft"
    assert [(c["name"], c["passed"], c["required"]) for c in written["checks"]] == [
        ("draft_compatible", False, False),
        ("draft_acceptance_measured", False, False),
    ]  # optional: blocks nothing


def test_larger_draft_vocabulary_is_a_finding_with_the_mapping(tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    from onboard.speculative.compat import check_compatibility

    draft = tmp_path / "larger-vocab-draft"
    model = _hf(DRAFT)
    model.resize_token_embeddings(4100, mean_resizing=False)
    model.save_pretrained(draft)
    tokenizer = AutoTokenizer.from_pretrained(DRAFT, trust_remote_code=False)
    tokenizer.add_tokens(["<|draft_extra_0|>", "<|draft_extra_1|>"])
    tokenizer.save_pretrained(draft)
    shutil.copy2(DRAFT / "generation_config.json", draft / "generation_config.json")
    compat = check_compatibility(TARGET, draft)
    larger = [f for f in compat.findings if f.code == "draft-vocab-larger"]
    assert len(larger) == 1 and larger[0].severity == "warning"
    extra = {tokenizer.convert_tokens_to_ids(t) for t in ("<|draft_extra_0|>", "<|draft_extra_1|>")}
    assert extra == {4058, 4059}  # after the 4058 tokens the target has
    assert compat.vocab_mapping == {i: None for i in (*sorted(extra), 4096, 4097, 4098, 4099)}
    assert "4058->none" in larger[0].message and "4099->none" in larger[0].message
    assert (compat.target_rows, compat.draft_rows) == (4096, 4100)


def test_report_plot_and_checklist_item(result: dict, tmp_path: Path) -> None:
    """draft-check.json in the revision folder: the report's acceptance-by-position plot, and the optional
    speculative_decoding item, open until validate's speculative_equivalence check passes too."""
    from onboard.promote.promote import evaluate_revision
    from onboard.promote.report import render_report
    from tests.promote.workspaces import SLUG, make_workspace

    rev = make_workspace(tmp_path)
    shutil.copy2(result["written"], rev / "draft-check.json")

    def item() -> object:
        state = evaluate_revision(SLUG, tmp_path).state
        return next(i for i in state.items if i.id == "speculative_decoding")

    first = item()
    assert first.status not in ("done", "failed") and first.required is False  # half the evidence
    assert state_ready_unchanged(tmp_path)
    validate = json.loads((rev / "validate.json").read_text())
    validate["checks"].append({"name": "speculative_equivalence", "passed": True, "required": False})
    (rev / "validate.json").write_text(json.dumps(validate))
    assert item().status == "done"
    html = render_report(SLUG, tmp_path).html.read_text()
    assert 'id="plot-acceptance-by-position"' in html and "Speculative decoding: " in html


def state_ready_unchanged(ws: Path) -> bool:
    """An optional item never blocks: the run is as ready as it was without draft-check."""
    from onboard.promote.promote import evaluate_revision
    from tests.promote.workspaces import SLUG

    return evaluate_revision(SLUG, ws).state.ready


def test_golden_trajectories_are_the_goldens_and_measure_like_the_targets_own(result: dict, tmp_path: Path) -> None:
    """--golden: the trajectories are the goldens' prompts and recorded continuations, in order; where a golden
    continuation equals the target's own greedy one, the draft's accepted runs along it are the same; goldens of
    another checkpoint are refused by name."""
    from onboard.errors import InputError
    from onboard.speculative.check import Request, run
    from onboard.validate_serving.golden import read_golden, record

    golden = record(str(TARGET), tmp_path / "golden", max_new_tokens=16, dtype="bfloat16", calibrate=())
    recorded = [p for p in read_golden(golden.folder).prompts if p.generated_ids]
    request = Request(str(TARGET), str(DRAFT), dtype="bfloat16", temperature=0.0, golden=golden.folder, out=tmp_path)
    found = run(request, lambda _m: None)
    assert found["prompts"]["from"] == f"goldens {golden.folder}"
    assert [(t["name"], t["prompt_ids"], t["continuation_ids"]) for t in found["trajectories"]] == [
        (p.name, list(p.prompt_ids), list(p.generated_ids)) for p in recorded
    ]
    own = {t["name"]: t for t in result["trajectories"]}
    same = [t for t in found["trajectories"] if t["name"] in own
            and (own[t["name"]]["prompt_ids"], own[t["name"]]["continuation_ids"]) == (t["prompt_ids"], t["continuation_ids"])]  # fmt: skip
    assert len(same) >= 3, "too few identical trajectories to compare"
    for t in same:
        assert t["greedy_runs"] == own[t["name"]]["greedy_runs"], t["name"]
    draft_golden = record(str(DRAFT), tmp_path / "draft-golden", max_new_tokens=4, dtype="bfloat16", calibrate=())
    with pytest.raises(InputError, match="goldens of another checkpoint"):
        run(Request(str(TARGET), str(DRAFT), golden=draft_golden.folder, out=tmp_path / "x"), lambda _m: None)


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("vocab_size", 10**30, "config.json: vocab_size 1000000000000000000000000000000 is not an embedding's row count"),
        ("vocab_size", -5, "config.json: vocab_size -5 is not an embedding's row count"),
        ("hidden_size", -1, "transformers cannot load this checkpoint (RuntimeError: Trying to create tensor with "
                            "negative dimension"),
        ("hidden_size", 10**30, "transformers cannot load this checkpoint"),
    ],
)  # fmt: skip
def test_a_draft_config_its_weights_cannot_have_is_an_error_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str, value: object, says: str
) -> None:
    # Before: vocab_size 10**30 walked every row past the tokenizer's (a hang); hidden_size -1 or 10**30 reached
    # torch's allocator through the adapter and transformers (internal errors with C++ frames).
    from onboard.cli import main

    draft = tmp_path / "draft"
    shutil.copytree(DRAFT, draft)
    config = json.loads((draft / "config.json").read_text())
    config[key] = value
    (draft / "config.json").write_text(json.dumps(config))
    with pytest.raises(SystemExit) as exit_info:
        main(["draft-check", str(TARGET), str(draft), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "internal error" not in err and "frame #" not in err, err[-2000:]
    assert f"draft{'/' if key == 'vocab_size' else ': '}{says}" in err and "Error: " in err, err[-2000:]
