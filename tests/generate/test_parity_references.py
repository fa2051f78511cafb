"""Which reference runs parity's yardstick, on the trained fixture (tests/fixtures/trained-qwen3): transformers in
the calibration dtype (float64 for a float32 adapter; twice in bf16, eager and sdpa attention, pooled), a reference
given as a module is itself cast, and repository code that may not run is refused before anything loads."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from onboard.comparator import FAILED_CHECKS
from onboard.errors import InputError
from onboard.generate_adapter.parity import _own_runs, check_parity, reference_model
from onboard.generate_adapter.regenerate import ADAPTERS_DIR
from onboard.reference import RemoteCodePolicy
from tests.generate.test_parity_trained import TRAINED, repository_code_copy


def _attention(model) -> str:
    return model.config._attn_implementation


def test_the_reference_is_transformers_with_eager_attention_in_the_asked_dtype() -> None:
    model = reference_model(TRAINED, torch.bfloat16)
    assert type(model).__module__.startswith("transformers.")
    assert _attention(model) == "eager" and next(model.parameters()).dtype == torch.bfloat16
    assert _attention(reference_model(TRAINED, torch.float32, RemoteCodePolicy(), attn="sdpa")) == "sdpa"


def test_a_float32_adapter_is_judged_against_one_float64_run() -> None:
    runs = list(_own_runs(TRAINED, "float32", RemoteCodePolicy(), None))
    assert [(_attention(m), next(m.parameters()).dtype) for m in runs] == [("eager", torch.float64)]


def test_a_bf16_adapter_is_judged_against_eager_and_sdpa_runs_in_bf16() -> None:
    runs = list(_own_runs(TRAINED, "bfloat16", RemoteCodePolicy(), None))
    assert [(_attention(m), next(m.parameters()).dtype) for m in runs] == [
        ("eager", torch.bfloat16),
        ("sdpa", torch.bfloat16),
    ]


def test_a_given_reference_is_itself_cast_and_left_untouched() -> None:
    given = torch.nn.Linear(3, 2)
    runs = list(_own_runs(TRAINED, "bfloat16", RemoteCodePolicy(), given))
    assert len(runs) == 1 and runs[0] is not given
    assert runs[0].weight.dtype == torch.bfloat16 and given.weight.dtype == torch.float32
    assert torch.equal(runs[0].weight.float(), given.weight.bfloat16().float())


def test_repository_code_that_may_not_run_is_refused_before_it_loads(tmp_path: Path) -> None:
    folder = repository_code_copy(tmp_path)
    with pytest.raises(InputError) as refused:
        reference_model(folder, torch.float32)
    said = f"{refused.value.message} {refused.value.hint}"
    assert "repository" in said and f"onboard generate {folder} --parity --trust-remote-code" in said, said
    with pytest.raises(InputError) as refused:  # the user's --unsafe-no-sandbox is kept in the command to run
        reference_model(folder, torch.float32, RemoteCodePolicy(unsafe_no_sandbox=True))
    assert "--parity --trust-remote-code --unsafe-no-sandbox" in f"{refused.value.message} {refused.value.hint}"


def test_a_given_reference_runs_where_the_checkpoint_reference_is_repository_code(tmp_path: Path) -> None:
    """A caller's own reference (tests, or a reference already run elsewhere) needs no trust in the folder's code."""
    folder = repository_code_copy(tmp_path)
    report = check_parity(ADAPTERS_DIR / "qwen3.py", folder, reference=reference_model(TRAINED, torch.float32))
    assert (report["passed"], report["status"]) == (True, "passed"), report["detail"]
    assert report["worst"] < 1e-4 and report["prompts"], report["detail"]  # it ran, against the given reference


def test_trusted_repository_code_is_the_reference_through_the_sandbox(tmp_path: Path, monkeypatch) -> None:
    """With --trust-remote-code the folder's own code is the reference: the sandbox is asked, under the user's
    policy, for its logits in float32 (the truth) and float64 (the calibration run), and the report names it. The
    worker here is a stand-in answering with transformers' logits of the same weights (the folder's code would be
    Qwen3's): nothing of the folder runs."""
    from onboard import reference
    from onboard.generate_adapter.remote_reference import WORKER
    from onboard.reference import load_transformers
    from onboard.sandbox import code_hash

    folder = repository_code_copy(tmp_path)
    asked = []

    def worker(target: str, kwargs: dict, checkpoint: Path, policy: RemoteCodePolicy, wall_s: float | None = None):
        asked.append((target, kwargs["dtype"], Path(checkpoint), policy))
        model = load_transformers(TRAINED, kwargs["dtype"])
        with torch.no_grad():
            return {"logits": [model(input_ids=torch.tensor([ids])).logits.float() for ids in kwargs["prompts"]]}

    monkeypatch.setattr(reference, "run_in_sandbox", worker)
    policy = RemoteCodePolicy(trust_remote_code=True)
    report = check_parity(ADAPTERS_DIR / "qwen3.py", folder, policy=policy)
    assert (report["passed"], report["status"]) == (True, "passed"), report["detail"]
    assert asked == [(WORKER, "float32", folder, policy), (WORKER, "float64", folder, policy)]
    assert report["detail"].startswith(
        "passed (catches logits x1.05, layer 1 attention x1.05): "
        "adapter in float32 vs the repository's code float32, judged against the repository's code in float64: "
    ), report["detail"]
    assert report["reference"]["identity"] == f"repository code sha256:{code_hash(folder)}"
    assert report["reference"]["library"] == "repository code" and report["reference"]["isolation"]


def test_the_bisect_of_a_failed_parity_compares_against_the_given_reference() -> None:
    """A reference-side defect (its head x1.03, untied from the embedding): the verdict fails, and the bisect finds
    the same reference's logits off by the inverse scale (not transformers reloaded from the folder, which agrees)."""
    given = reference_model(TRAINED, torch.float32)
    given.lm_head.weight = torch.nn.Parameter(given.lm_head.weight.detach() * 1.03)
    report = check_parity(ADAPTERS_DIR / "qwen3.py", TRAINED, reference=given)
    assert not report["passed"] and report["first_divergence"]["module"] == "logits", report["detail"]
    assert "adapter/reference = 0.9709" in report["divergence"]  # 1 / 1.03
    # The failed checks by name (what the coverage table and other callers read, not the detail's text): a head
    # scaled by 3% fails the logit-scale fit.
    assert "logit-scale" in report["failed"] and set(report["failed"]) <= set(FAILED_CHECKS), report["failed"]
