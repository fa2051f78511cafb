"""The parity harness's parts, in process and without model weights: the prompts it sizes from config.json (a prompt
longer than twice the sliding window, capped by the context), the logit gap it reports per prompt, how it imports an
adapter file, and what an unverified result says. The verdicts themselves are in test_parity.py and
test_parity_trained.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from onboard.generate_adapter.parity import (
    CALIBRATED_BAR,
    PromptParity,
    _logits,
    compare,
    load_adapter,
    parity_config,
    position_errors_of,
    prompt_lengths,
    prompts,
    summarise,
    unverified,
)

# Prompt lengths


def test_prompts_without_a_window_are_short_medium_and_48_tokens() -> None:
    assert prompt_lengths({}) == (5, 19, 48)
    assert prompt_lengths({"sliding_window": None, "max_position_embeddings": None}) == (5, 19, 48)


@pytest.mark.parametrize("window", [16, 20, 21])
def test_a_small_window_is_outrun_by_the_48_token_prompt(window: int) -> None:
    lengths = prompt_lengths({"sliding_window": window})
    assert lengths == (5, 19, 48) and lengths[-1] > 2 * window


@pytest.mark.parametrize(("window", "longest"), [(22, 49), (64, 133), (4096, 8197)])
def test_the_longest_prompt_outruns_twice_a_large_window_by_five_tokens(window: int, longest: int) -> None:
    """Mistral-style windows: the longest prompt is 2 x window + 5 tokens, so every position past the window
    attends through a cut window at least once (and the prompt stays as short as that allows)."""
    assert prompt_lengths({"sliding_window": window}) == (5, 19, longest)
    assert 2 * window < longest <= 2 * window + 5


def test_the_context_length_caps_every_prompt() -> None:
    assert prompt_lengths({"sliding_window": 64, "max_position_embeddings": 100}) == (5, 19, 100)
    assert prompt_lengths({"max_position_embeddings": 12}) == (5, 12)  # 19 and 48 both cut to 12: one prompt
    assert prompt_lengths({"max_position_embeddings": 4}) == (4,)


def test_prompts_are_seeded_token_ids_inside_the_vocabulary() -> None:
    config = {"vocab_size": 7, "sliding_window": 30}
    got = prompts(config)
    assert [tuple(p.shape) for p in got] == [(1, 5), (1, 19), (1, 65)]
    assert all(p.dtype == torch.int64 and int(p.min()) >= 0 and int(p.max()) < 7 for p in got)
    assert {int(t) for p in got for t in p.flatten()} == set(range(7))  # the whole vocabulary is drawn from
    assert all(torch.equal(a, b) for a, b in zip(got, prompts(config)))  # same seed: same prompts
    assert all(torch.equal(a, b) for a, b in zip(got, prompts(config, seed=0)))
    assert not torch.equal(got[-1], prompts(config, seed=1)[-1])


def test_a_composite_config_is_sized_by_its_text_part(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"model_type": "vlm", "text_config": {"vocab_size": 9, "x": 1}}')
    assert parity_config(tmp_path) == {"vocab_size": 9, "x": 1}
    # The language model's section wins over a wrapper's top-level copy (PaliGemma keeps a legacy vocab_size there),
    # as inspect's ConfigView reads it: the prompts are drawn from the vocabulary the text model embeds.
    (tmp_path / "config.json").write_text('{"vocab_size": 5, "text_config": {"vocab_size": 9}}')
    assert parity_config(tmp_path) == {"vocab_size": 9}
    (tmp_path / "config.json").write_text('{"vocab_size": 5}')
    assert parity_config(tmp_path) == {"vocab_size": 5}
    (tmp_path / "config.json").write_text('{"model_type": "odd", "n_vocab": 5}')  # no text part: itself
    assert parity_config(tmp_path) == {"model_type": "odd", "n_vocab": 5}


# The logit gap per prompt


def position_errors(model, refs: list[torch.Tensor], inputs: list[torch.Tensor]) -> list[torch.Tensor]:  # type: ignore[no-untyped-def]
    with torch.no_grad():
        return position_errors_of([_logits(model, ids) for ids in inputs], refs)


class _Fixed(torch.nn.Module):
    """A model whose logits for a prompt of n tokens are a fixed function of n (bf16 to show the float cast)."""

    def __init__(self, offset: float = 0.0, at: int = -1, wrap: bool = False) -> None:
        super().__init__()
        self.offset, self.at, self.wrap = offset, at, wrap

    def forward(self, input_ids: torch.Tensor):
        n = input_ids.shape[1]
        logits = torch.arange(n * 4, dtype=torch.float32).reshape(1, n, 4) - 2.0
        logits[0, self.at, 1] += self.offset
        logits = logits.to(torch.bfloat16)
        if self.wrap:  # a transformers-style output object
            return type("Out", (), {"logits": logits})()
        return logits


def test_compare_reports_the_largest_logit_gap_of_each_prompt() -> None:
    inputs = [torch.zeros(1, 2, dtype=torch.long), torch.zeros(1, 3, dtype=torch.long)]
    got = compare(_Fixed(offset=0.5, at=0), _Fixed(wrap=True), inputs)
    # prompt of 2: logits -2..5 (max |logit| 5); prompt of 3: -2..9 (max 9); one logit moved by 0.5
    assert got == [PromptParity(2, 0.5, 5.0, 0.1), PromptParity(3, 0.5, 9.0, 0.5 / 9)]
    assert all(p.relative == pytest.approx(p.max_abs_diff / p.max_abs_logit) for p in got)


def test_identical_models_have_no_gap_and_position_errors_are_per_position() -> None:
    inputs = [torch.zeros(1, 3, dtype=torch.long)]
    assert compare(_Fixed(), _Fixed(wrap=True), inputs) == [PromptParity(3, 0.0, 9.0, 0.0)]
    refs = [torch.arange(12, dtype=torch.float32).reshape(1, 3, 4) - 2.0]
    errors = position_errors(_Fixed(offset=-1.0, at=1), refs, inputs)
    assert len(errors) == 1 and errors[0].dtype == torch.float64
    assert errors[0].tolist() == pytest.approx([0.0, 1 / 9, 0.0])  # 1 / max|logit| 9, at the second position only


def test_an_all_zero_reference_gives_an_absolute_gap_not_a_division_by_zero() -> None:
    summary = summarise(torch.tensor([0.0, 2.5], dtype=torch.float64), torch.zeros(1, 2, 4))
    assert summary == PromptParity(2, 0.0, 0.0, 2.5)
    errors = position_errors(_Fixed(), [torch.zeros(1, 2, 4)], [torch.zeros(1, 2, dtype=torch.long)])
    assert float(errors[0].max()) == pytest.approx(5.0 / 1e-30)  # any gap against an all-zero reference is huge


# Loading an adapter file; a result that could not run


def test_an_adapter_file_is_imported_under_its_own_module_name(tmp_path: Path) -> None:
    path = tmp_path / "acme_chat.py"
    path.write_text("VALUE = 41 + 1\n")
    module = load_adapter(str(path))
    assert module.VALUE == 42 and module.__name__ == "_onboard_adapter_acme_chat"
    assert sys.modules["_onboard_adapter_acme_chat"] is module  # its classes pickle and re-import by that name
    assert module.__file__ == str(path)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_an_unverified_result_is_never_passed_and_measures_nothing(dtype: str) -> None:
    result = unverified(dtype, "no reference may run; run: onboard generate x --parity --trust-remote-code")
    assert result == {
        "passed": False,
        "status": "unverified",
        "dtype": dtype,
        "worst": None,
        "reference_worst": None,
        "tolerance": CALIBRATED_BAR,  # the bar it would have been judged by
        "failed": [],  # no check ran, so none failed: `passed` False and `status` say why
        "prompts": [],
        "detail": "unverified: no reference may run; run: onboard generate x --parity --trust-remote-code",
    }
