"""A parity pass states its power (issue 41): where the reference's own noise hides a layer 1 attention x1.05 defect,
the pass is "passed, low power (would miss layer 1 attention x1.05)", and that claim is true: the same defect, written
into the adapter's source (not injected by parity_power's hook), gets through the same comparison there. On the
trained fixture (tests/fixtures/trained-qwen3) the probes are caught, the pass is plain, and the same defect fails.

The low-power checkpoint is the committed tiny phimoe in bfloat16 (tests/generate/conftest.py): its sparsemixer
top-2 routing sits on near-ties, so transformers' own bfloat16 run moves a logprob by up to ~0.33 (four top-1
swaps) and the calibrated tolerance on the max logprob error is 4x that; a layer 1 attention defect still passes at
x1.2 and fails by x1.5 there (on the trained fixture x1.05 already fails).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from onboard.generate_adapter.parity import check_parity, load_adapter, parity_config, prompts
from onboard.generate_adapter.parity_power import LOW_POWER, PROBES, probe_logits
from onboard.generate_adapter.regenerate import ADAPTERS_DIR
from tests.generate.test_parity_trained import CAUGHT, TRAINED

NOISY = "phimoe"
"""The tiny architecture whose bfloat16 reference noise hides the layer 1 attention probe (sparsemixer near-ties)."""
PROBE, SCALE, LAYER = "layer 1 attention x1.05", 1.05, 1  # the acceptance's seeded defect, as parity_power names it
PASSED = ("passed", LOW_POWER)  # the comparison passed (plainly or at low power): not "failed"

_INIT = "    def __init__(self, args: ModelArgs, i: int) -> None:\n        super().__init__()\n"
_ATTENTION_BRANCH = "x = x + self.self_attn(self.input_layernorm(x), cos, sin, ctx)\n"


def defective_adapter(model_type: str, tmp_path: Path, scale: float = SCALE, layer: int = LAYER) -> Path:
    """The committed adapter of `model_type` with its decoder layer `layer`'s attention branch multiplied by `scale`
    in the source (the residual stream receives attn x scale): a real defect, written where a generator bug would
    put it, not through parity_power's hooks."""
    source = (ADAPTERS_DIR / f"{model_type}.py").read_text()
    assert source.count(_INIT) == 1 and source.count(_ATTENTION_BRANCH) == 1, f"{model_type}: layer code changed"
    source = source.replace(_INIT, f"{_INIT}        self.defect = {scale} if i == {layer} else 1.0\n")
    source = source.replace(_ATTENTION_BRANCH, f"{_ATTENTION_BRANCH[:-1]} * self.defect\n")
    path = tmp_path / f"{model_type}_layer{layer}_attention_x{str(scale).replace('.', '_')}.py"
    path.write_text(source)
    return path


def adapter_run(adapter_file: Path, checkpoint: Path) -> tuple[torch.nn.Module, Callable[[], list[torch.Tensor]]]:
    """The adapter in bfloat16 on `checkpoint`, and its forward over parity's prompts (logits in float32)."""
    model = load_adapter(adapter_file).Model.from_pretrained(checkpoint, dtype=torch.bfloat16)
    inputs = prompts(parity_config(checkpoint))

    def run() -> list[torch.Tensor]:
        with torch.no_grad():
            return [model(input_ids=ids).float() for ids in inputs]

    return model, run


@pytest.fixture(scope="module")
def noisy(tiny) -> Path:  # type: ignore[no-untyped-def]
    return tiny(NOISY, "bfloat16")


@pytest.mark.parametrize("where", [NOISY, "trained"])
def test_the_probe_bends_exactly_what_the_source_defect_bends(tiny, tmp_path: Path, where: str) -> None:
    """parity_power's layer 1 attention probe on the clean adapter gives the very logits of the adapter whose source
    scales layer 1's attention branch: the probe names the defect it measures (the right layer, the right branch)."""
    model_type, checkpoint = (NOISY, tiny(NOISY, "bfloat16")) if where == NOISY else ("qwen3", TRAINED)
    probe = next(p for p in PROBES if p.name == PROBE)
    clean, run = adapter_run(ADAPTERS_DIR / f"{model_type}.py", checkpoint)
    clean_logits = run()
    probed = probe_logits(probe, clean, clean_logits, run)
    defect_logits = adapter_run(defective_adapter(model_type, tmp_path), checkpoint)[1]()
    other_layer = adapter_run(defective_adapter(model_type, tmp_path, layer=0), checkpoint)[1]()
    assert probed is not None
    assert all(torch.equal(p, d) for p, d in zip(probed, defect_logits))
    assert not all(torch.equal(p, c) for p, c in zip(probed, clean_logits))  # the defect moves the logits
    assert not all(torch.equal(p, o) for p, o in zip(probed, other_layer))  # and layer 0's would move them otherwise


def test_reference_noise_hiding_the_probe_makes_the_pass_low_power(noisy: Path) -> None:
    report = check_parity(ADAPTERS_DIR / f"{NOISY}.py", noisy, dtype="bfloat16")
    print(report["detail"])
    assert (report["status"], report["passed"]) == (LOW_POWER, False), report["detail"]  # never a plain pass
    assert report["power"] == {"missed": [PROBE], "caught": ["logits x1.05"]}
    assert report["detail"].startswith(f"passed, low power (would miss {PROBE}): "), report["detail"]
    assert "FAILED" not in report["detail"] and "divergence" not in report
    # the noise is the reference's own: transformers in bfloat16 strays from its float32 run by over 5% of the
    # largest logit (0.118 here; the tiny models whose probes are caught stay near 1e-2)
    assert report["reference_worst"] > 0.05, report["detail"]


def test_would_miss_is_true_the_defect_passes_where_the_noise_hides_it(tiny, tmp_path: Path, noisy: Path) -> None:
    """The real layer 1 attention x1.05 defect passes the bfloat16 comparison on the noisy checkpoint (what the
    low-power pass warned of), while in float32 on the same checkpoint, judged against float64, it fails: the defect
    is there, only the bfloat16 noise hides it."""
    defect = defective_adapter(NOISY, tmp_path)
    clean = check_parity(ADAPTERS_DIR / f"{NOISY}.py", noisy, dtype="bfloat16")
    hidden = check_parity(defect, noisy, dtype="bfloat16")
    print(f"clean: {clean['detail']}\ndefect x{SCALE}: {hidden['detail']}")
    assert hidden["status"] in PASSED and "FAILED" not in hidden["detail"], hidden["detail"]
    assert hidden["worst"] > 2 * clean["worst"], (hidden["worst"], clean["worst"])  # it moved the logits, unseen
    visible = check_parity(defect, tiny(NOISY), dtype="float32")
    print(f"defect x{SCALE} in float32: {visible['detail']}")
    assert (visible["status"], visible["passed"]) == ("failed", False), visible["detail"]
    assert "FAILED" in visible["detail"]


def test_on_trained_weights_the_probes_are_caught_and_the_same_defect_fails(tmp_path: Path) -> None:
    clean = check_parity(ADAPTERS_DIR / "qwen3.py", TRAINED, dtype="bfloat16")
    assert (clean["status"], clean["passed"]) == ("passed", True), clean["detail"]
    assert clean["power"] == {"missed": [], "caught": CAUGHT}
    assert clean["detail"].startswith(f"passed (catches {', '.join(CAUGHT)}): ")
    caught = check_parity(defective_adapter("qwen3", tmp_path), TRAINED, dtype="bfloat16")
    print(f"clean: {clean['detail']}\ndefect x{SCALE}: {caught['detail']}")
    assert (caught["status"], caught["passed"]) == ("failed", False), caught["detail"]
    assert "FAILED" in caught["detail"] and "power" not in caught
    assert caught["first_divergence"]["layer"] == LAYER, caught["divergence"]  # located where it was put


@pytest.mark.parametrize("model_type", ["qwen3_moe", "qwen2_moe"])
def test_a_candidate_already_carrying_the_defect_is_never_a_plain_pass(tiny, tmp_path: Path, model_type: str) -> None:
    """Power is measured from the candidate: on these bfloat16 checkpoints an adapter carrying layer 1 attention x1.05
    passes the comparison, and a further x1.05 probe (x1.10 from the truth) is caught. The probe also bends back
    (x1/1.05, to the truth), which passes: the pass is low power, naming the defect it carries."""
    checkpoint = tiny(model_type, "bfloat16")
    report = check_parity(defective_adapter(model_type, tmp_path), checkpoint, dtype="bfloat16")
    print(f"{model_type} defect x{SCALE}: {report['detail']}")
    assert report["status"] in ("failed", LOW_POWER) and not report["passed"], report["detail"]  # never plain
    if report["status"] == LOW_POWER:  # (here: failed outright would also be right, on a CPU that rounds otherwise)
        assert PROBE in report["power"]["missed"], report["power"]
