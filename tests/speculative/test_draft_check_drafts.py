"""draft-check with the drafts that are not models: n-gram lookup on the trained fixture, and a DeepSeek-V3-shaped
checkpoint's own MTP layer (onboard/speculative/mtp.py) as a self-draft."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

TARGET = Path(__file__).resolve().parents[1] / "fixtures" / "trained-qwen3"


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict, str]:
    from onboard.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["draft-check", *args, "--json"])
    captured = capsys.readouterr()
    return int(exit_info.value.code or 0), json.loads(captured.out) if captured.out else {}, captured.err


def test_ngram_draft_on_the_trained_fixture(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from onboard.speculative.drafts import ngram_proposals

    code, result, err = _cli(capsys, str(TARGET), "ngram", "--temperature", "0", "--max-new-tokens", "8",
                             "--out", str(tmp_path))  # fmt: skip
    assert code == 0, err
    assert result["draft_kind"] == "ngram" and result["sampled"] is None and "compatibility" not in result
    assert [row["k"] for row in result["greedy"]["by_k"]] == list(range(1, 9))
    # Independently: first proposals accepted = the lookup's first token equals the target's next token.
    hits = starts = 0
    for t in result["trajectories"]:
        sequence = t["prompt_ids"] + t["continuation_ids"]
        proposals = ngram_proposals(sequence, len(t["prompt_ids"]))
        for i, proposal in enumerate(proposals[:-1]):  # the last start has no room for a proposal
            starts += 1
            hits += bool(proposal) and proposal[0] == t["continuation_ids"][i]
    first = result["greedy"]["by_position"][0]
    assert (first["windows"], first["accepted"]) == (starts, hits)
    assert "greedy alpha" in err and (tmp_path / "draft-check.json").is_file()


def test_mtp_self_draft_is_measured(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from onboard.adapters.deepseek_v3 import Model
    from onboard.speculative.mtp import load_mtp, mtp_draft_logits, target_hidden
    from tests.tiny.factory import make_tiny_mtp_checkpoint

    checkpoint = make_tiny_mtp_checkpoint("deepseek_v3", tmp_path / "ckpt", overrides={"initializer_range": 0.3})
    code, result, err = _cli(capsys, str(checkpoint), "mtp", "--dtype", "float32", "--max-new-tokens", "6",
                             "--out", str(tmp_path / "out"))  # fmt: skip
    assert code == 0, err
    assert result["draft_kind"] == "mtp" and result["greedy"]["by_position"][0]["windows"] > 0
    # Independently, from the teacher-forced depth-0 logits: proposal 1 from start t is the MTP's argmax at row
    # P+t-2 (the target's hidden state there and token P+t-1); accepted when it is the target's next token.
    target = Model.from_pretrained(checkpoint)
    draft = load_mtp(checkpoint, target)
    hits = starts = 0
    with torch.no_grad():
        for t in result["trajectories"]:
            prompt, cont = t["prompt_ids"], t["continuation_ids"]
            ids = torch.tensor([prompt + cont])
            rows = mtp_draft_logits(draft, target_hidden(target, ids)[1], ids)[0].argmax(-1).tolist()
            for i in range(len(cont) - 1):
                starts += 1
                hits += rows[len(prompt) + i - 2] == cont[i]
    first = result["greedy"]["by_position"][0]
    assert (first["windows"], first["accepted"]) == (starts, hits)


def test_mtp_on_a_checkpoint_without_mtp_layers_is_a_finding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, result, err = _cli(capsys, str(TARGET), "mtp", "--max-new-tokens", "2", "--out", str(tmp_path))
    assert code == 1
    assert [f["code"] for f in result["findings"]] == ["mtp-draft-unavailable"]
    assert result["checks"][1] == {**result["checks"][1], "passed": False, "skipped": True}
