"""The MTP module of a DeepSeek-V3-shaped checkpoint: built by the adapter's own layers, loaded from the checkpoint's
tensors, equal to transformers' MtpModel, and measured as a self-draft against an independent count."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from onboard.adapters.deepseek_v3 import Model
from onboard.comparator import threshold
from onboard.errors import InputError
from onboard.speculative.mtp import load_mtp, mtp_draft_chain, mtp_draft_logits, mtp_draft_windows, target_hidden
from tests.speculative import mtp_parity as mtp_parity_module
from tests.speculative.mtp_parity import mtp_parity
from tests.tiny.factory import make_tiny_checkpoint, make_tiny_mtp_checkpoint

MTP_LAYER = 3  # tests/tiny's deepseek_v3 has 3 decoder layers: the MTP layer follows at index 3


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # initializer_range 0.3: peaked distributions rather than the 0.02 default's near-uniform ones
    return make_tiny_mtp_checkpoint("deepseek_v3", tmp_path_factory.mktemp("mtp"), overrides={"initializer_range": 0.3})


def test_mtp_loads_the_checkpoint_tensors(checkpoint: Path) -> None:
    draft = load_mtp(checkpoint, Model.from_pretrained(checkpoint))
    tensors = {k: v for k, v in load_file(str(checkpoint / "model.safetensors")).items() if f".{MTP_LAYER}." in k}
    params = dict(draft.named_parameters())
    prefix = f"model.layers.{MTP_LAYER}.mlp."
    # the adapter's weight map: router and shared experts renamed / fused, experts stacked
    fused = {
        prefix + "router.weight": tensors[prefix + "gate.weight"],
        prefix + "e_score_correction_bias": tensors[prefix + "gate.e_score_correction_bias"],
        prefix + "shared.gate_up_proj.weight": torch.cat(
            (tensors[prefix + "shared_experts.gate_proj.weight"], tensors[prefix + "shared_experts.up_proj.weight"])
        ),
        prefix + "shared.down_proj.weight": tensors[prefix + "shared_experts.down_proj.weight"],
    }
    for e in range(params[prefix + "experts_gate_up"].shape[0]):
        expert = f"{prefix}experts.{e}."
        gate_up = torch.cat((tensors[expert + "gate_proj.weight"], tensors[expert + "up_proj.weight"]))
        assert torch.equal(params[prefix + "experts_gate_up"][e], gate_up)
        assert torch.equal(params[prefix + "experts_down"][e], tensors[expert + "down_proj.weight"])
    direct = {name: tensors[name] for name in tensors if name in params}
    assert {n for n in tensors if "mlp." not in n} <= set(direct)  # attention, norms, eh_proj, shared_head, embed
    for name, tensor in {**direct, **fused}.items():
        assert torch.equal(params[name], tensor), name
    assert set(params) == set(direct) | set(fused) | {prefix + "experts_gate_up", prefix + "experts_down"}
    assert {"enorm", "hnorm", "eh_proj", "shared_head"} <= {n.split(".")[3] for n in params}


def test_mtp_parity_with_transformers_and_a_swapped_norm_fails(
    checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The MTP draft is judged by the comparator generate and validate use (float32 against transformers' own
    float64 run): the draft as loaded passes; the same draft with enorm and hnorm exchanged (the concat order read
    the other way) fails, on the comparator's own rules."""
    result = mtp_parity(checkpoint, Model)
    print(result["detail"])
    assert result["status"] == "passed" and result["passed"] is True, result
    assert result["tolerance"] == "calibrated (onboard/comparator.py THRESHOLDS)"
    assert "judged against transformers in float64" in result["detail"] and "FAILED" not in result["detail"]
    # For reading, max|Δlogit| / max|logit|: within float32 rounding of a second implementation (point_error's bound).
    assert 0 < result["worst"] < threshold("point_error", "float32")

    def swapped(path: Path, target: object) -> object:
        draft = load_mtp(path, target)
        layer = draft.layer(0)
        layer.enorm.weight, layer.hnorm.weight = layer.hnorm.weight, layer.enorm.weight
        return draft

    monkeypatch.setattr(mtp_parity_module, "load_mtp", swapped)
    broken = mtp_parity(checkpoint, Model)
    print(broken["detail"])
    assert broken["status"] == "failed" and broken["passed"] is False
    assert "; FAILED: max logprob error" in broken["detail"] and "mean KL" in broken["detail"]
    assert broken["worst"] > 1e-2


def test_missing_mtp_tensors_and_no_mtp_are_input_errors(tmp_path: Path) -> None:
    # transformers' DeepseekV3Config defaults to one MTP layer, and save_pretrained writes none of its tensors:
    # exactly a converted checkpoint that lost them
    plain = make_tiny_checkpoint("deepseek_v3", tmp_path / "plain")
    with pytest.raises(InputError, match=rf"no tensors model\.layers\.{MTP_LAYER}\.\*"):
        load_mtp(plain, Model.from_pretrained(plain))
    none = make_tiny_checkpoint("deepseek_v3", tmp_path / "none", overrides={"num_mtp_layers": 0})
    with pytest.raises(InputError, match="declares no MTP layer"):
        load_mtp(none, Model.from_pretrained(none))


def _bigram_checkpoint(checkpoint: Path, out: Path, mix: float) -> Path:
    """A copy whose target is a bigram model (every attention and MLP output zeroed: logits = head(norm(embed)))
    and whose MTP layer is that bigram applied to token t+1 (eh_proj picks the embedding half), plus `mix` times
    a random projection of the hidden half: acceptance 1 at mix 0, falling as mix grows. The MTP reads the hidden
    half and the embedding half as the reference does, or its acceptance collapses."""
    out.mkdir()
    for f in checkpoint.iterdir():
        (out / f.name).write_bytes(f.read_bytes())
    w = load_file(str(checkpoint / "model.safetensors"))
    for name in w:
        if name.endswith(("o_proj.weight", "down_proj.weight")):
            w[name] = torch.zeros_like(w[name])
    prefix, hidden = f"model.layers.{MTP_LAYER}.", w["model.norm.weight"].shape[0]
    gen = torch.Generator().manual_seed(7)
    w[prefix + "eh_proj.weight"] = torch.cat((torch.eye(hidden), mix * torch.randn(hidden, hidden, generator=gen)), 1)
    w[prefix + "enorm.weight"] = torch.ones(hidden)
    w[prefix + "shared_head.norm.weight"] = w["model.norm.weight"].clone()
    save_file(w, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


def _simulated_accepted(rows: torch.Tensor, seq: torch.Tensor, prompt: int) -> int:
    """Tokens accepted by greedy one-token MTP speculation along the target's greedy sequence: after the target
    emits token j, the draft for j+1 is row j-1 (hidden j-1, token j); accepted -> the target also emits j+2. As in
    transformers' assisted generation, no draft when only the target's own last token is left to generate."""
    j, accepted = prompt, 0
    while j < seq.shape[1] - 2:
        hit = bool(rows[j - 1] == seq[0, j + 1])
        accepted, j = accepted + hit, j + 1 + hit
    return accepted


def test_mtp_self_draft_acceptance_equals_transformers_count(checkpoint: Path, tmp_path: Path) -> None:
    """Acceptance of the MTP self-draft (k=1), measured with our module on the greedy sequence, equals the count
    of tokens transformers' generate(use_mtp=True) gets without a target forward pass."""
    from transformers import AutoModelForCausalLM

    path = _bigram_checkpoint(checkpoint, tmp_path / "bigram", mix=0.1)  # 12 of 36 accepted; 0.0: all
    target = Model.from_pretrained(path)
    draft = load_mtp(path, target)
    main = AutoModelForCausalLM.from_pretrained(path, trust_remote_code=False).eval()
    main._keys_to_ignore_on_load_unexpected = [rf"model\.layers\.{MTP_LAYER}\..*"]
    passes: list[int] = []
    main.model.register_forward_hook(lambda *_: passes.append(1))
    prompt, new = 6, 24
    ours = theirs = 0
    for seed in range(3):
        ids = torch.randint(3, 1000, (1, prompt), generator=torch.Generator().manual_seed(seed))
        passes.clear()
        seq = main.generate(ids, use_mtp=True, do_sample=False, max_new_tokens=new, min_new_tokens=new)
        theirs += new - len(passes)  # each target pass emits one token; the rest came from accepted drafts
        assert seq.shape[1] == prompt + new
        rows = mtp_draft_logits(draft, target_hidden(target, seq)[1], seq).argmax(-1)[0]
        ours += _simulated_accepted(rows, seq, prompt)
        hidden = target_hidden(target, seq)[1]
        windows = mtp_draft_windows(draft, hidden, seq, 2)  # chains share the first step with the one-step rows
        assert torch.equal(windows[:, 0].argmax(-1), rows[: windows.shape[0]])
        torch.testing.assert_close(mtp_draft_chain(draft, hidden, seq, 9, 2), windows[9])  # a chain alone: the same
    print(f"MTP self-draft (k=1): accepted {ours} tokens of {3 * new} (transformers: {theirs})")
    assert 0 < ours < 3 * new // 2 and ours == theirs  # neither none nor all: the mix makes some drafts miss


def test_draft_check_reports_the_mtp_self_draft_acceptance(checkpoint: Path, tmp_path: Path) -> None:
    """`onboard draft-check CKPT mtp` (SA's onboard/speculative/check.py) measures the MTP layer loaded here: greedy
    acceptance by k and by position, neither none nor every draft (the bigram checkpoint's MTP misses some)."""
    from onboard.speculative.check import Request, run

    path = _bigram_checkpoint(checkpoint, tmp_path / "bigram", mix=0.1)
    result = run(Request(str(path), "mtp", ks=(1, 2), temperature=0.0, dtype="float32", max_new_tokens=16,
                         out=tmp_path / "out"), lambda *_: None)  # fmt: skip
    first = result["greedy"]["by_k"][0]
    print(f"draft-check mtp: k=1 {first['accepted']} accepted in {first['steps']} target steps")
    assert first["k"] == 1 and 0 < first["accepted"] < first["steps"]
    assert 0 < result["greedy"]["by_position"][0]["rate"] < 1
