"""Real legacy GPT-NeoX code as the reference (issue 41): transformers 4.30.2's GPT-NeoX files re-shipped as
`legacy_gpt_neox` (tests/dayzero/legacy.py), the shape of Pythia / StableLM-alpha-era releases: fused
`query_key_value` grouped per head, parallel residual, LayerNorm with bias, rotary on `rotary_pct` of each head at
`rotary_emb_base`, and checkpoints storing the attention's persistent buffers (`attention.bias`, `masked_bias`,
`rotary_emb.inv_freq`).

What holds under today's transformers (5.x):
- from_pretrained leaves the rotary caches (plain attributes computed in `__init__`) on the meta device and the
  non-persistent `norm_factor` uninitialised: found, and the repair (own init, state dict loaded strictly) fixes them;
- the repaired model still cannot run: its forward calls `self.get_head_mask`, which transformers 5 removed. The
  reference is then reference-unusable naming that error (parity unverified), never an adapter failure;
- composition stops before any adapter: the `query_key_value` row layout is a code-only fact (FAMILY_FACTS knows it
  for gpt_neox, not for a new model_type). Supplied, the adapter composes with no stub, reads partial rotary from
  `rotary_pct` and the base from `rotary_emb_base`, and passes parity against transformers' own GPT-NeoX on the
  same tensors.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from onboard import reference_health
from onboard.reference import RemoteCodePolicy

TRUSTED = RemoteCodePolicy(trust_remote_code=True)
ROTARY_PCT, ROTARY_BASE, HEAD = 0.5, 20000, 32
CACHES = {
    f"gpt_neox.layers.{i}.attention.rotary_emb.{c}_cached (RotaryEmbedding)" for i in (0, 1) for c in ("cos", "sin")
}
REMOVED_API = r"AttributeError: 'GPTNeoXModel' object has no attribute 'get_head_mask'"

pytestmark = pytest.mark.needs("legacy-modeling")


@pytest.fixture
def layout_known(monkeypatch: pytest.MonkeyPatch) -> None:
    """The one code-only fact composition asks for, as a reviewer would add it: gpt_neox's (rows grouped per head)."""
    from onboard.generate_adapter import compose_knowledge

    facts = compose_knowledge.FAMILY_FACTS
    monkeypatch.setitem(facts, "legacy_gpt_neox", facts["gpt_neox"])


@pytest.fixture(scope="module")
def neox(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.dayzero.legacy import build_legacy_gpt_neox

    return build_legacy_gpt_neox(tmp_path_factory.mktemp("legacy") / "legacy_gpt_neox")


def test_the_fixture_is_real_4_30_2_code_storing_what_that_release_saved(neox: Path) -> None:
    import torch
    from safetensors.torch import load_file

    text = (neox / "PROVENANCE.md").read_text()
    assert "transformers 4.30.2" in text and "Apache-2.0" in text and "gpt_neox/modeling_gpt_neox.py" in text
    code = (neox / "modeling_legacy_gpt_neox.py").read_text()
    assert "self.cos_cached = emb.cos()" in code and "self.get_head_mask(" in code and "from ..." not in code
    config = json.loads((neox / "config.json").read_text())
    assert config["model_type"] == "legacy_gpt_neox" and config["use_parallel_residual"] is True
    assert (config["rotary_pct"], config["rotary_emb_base"]) == (ROTARY_PCT, ROTARY_BASE)
    assert not {"partial_rotary_factor", "rope_theta", "rope_parameters"} & set(config)
    state = load_file(neox / "model.safetensors")
    rotary = int(HEAD * ROTARY_PCT)
    want = 1.0 / (ROTARY_BASE ** (torch.arange(0, rotary, 2).float() / rotary))
    assert torch.equal(state["gpt_neox.layers.1.attention.rotary_emb.inv_freq"], want)
    assert state["gpt_neox.layers.0.attention.bias"].dtype == torch.bool and "embed_out.weight" in state
    assert "lm_head.weight" not in state and float(state["gpt_neox.layers.0.attention.masked_bias"]) == -1e9
    assert float(state["gpt_neox.layers.0.input_layernorm.weight"].std()) > 0.1  # trained-like, not ones


def test_unsound_as_loaded_the_repair_computes_the_caches(neox: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """from_pretrained (meta-device init) leaves the plain-attribute caches on meta and norm_factor uninitialised;
    constructed from config with its own init and the state dict loaded, nothing is missing and all is sound."""
    import torch
    from transformers import AutoModelForCausalLM

    from onboard.reference import remote_code_allowed

    monkeypatch.setenv("ONBOARD_SANDBOX_WORKER", "1")  # this test process stands in for the worker
    with remote_code_allowed():
        model = AutoModelForCausalLM.from_pretrained(neox, trust_remote_code=True, dtype=torch.float32)
    problems = [str(p) for p in reference_health.state_problems(model, neox)]
    assert {p.split(":")[0] for p in problems if "left on the meta device" in p} == CACHES, problems
    assert any(p.startswith("gpt_neox.layers.0.attention.norm_factor (GPTNeoXAttention): differs") for p in problems)
    blueprint = (type(model), copy.deepcopy(model.config), torch.float32)
    repaired, missing, unexpected = reference_health.repair(blueprint, neox)
    assert missing == unexpected == []  # the stored bias, masked_bias and inv_freq all load
    assert reference_health.state_problems(repaired, neox, own_init=True) == []
    rotary = repaired.gpt_neox.layers[1].attention.rotary_emb
    assert rotary.cos_cached.shape[-1] == int(HEAD * ROTARY_PCT) and bool(rotary.cos_cached.isfinite().all())


def test_the_repaired_reference_still_fails_on_a_removed_transformers_api(neox, monkeypatch) -> None:
    """Loaded the way onboard loads repository code: the repair runs, then the probe forward raises: the reference
    cannot be made sound, so it is reference-unusable, naming the error (never a raw traceback, never a verdict on
    the adapter)."""
    from onboard.errors import ReferenceUnusable
    from onboard.reference import load_transformers, remote_code_allowed

    monkeypatch.setenv("ONBOARD_SANDBOX_WORKER", "1")  # this test process stands in for the worker
    with remote_code_allowed(), pytest.raises(ReferenceUnusable, match="get_head_mask") as info:
        load_transformers(neox, "float32")
    assert info.value.cause.startswith("forward (GPTNeoXForCausalLM)"), info.value.cause
    assert "cos_cached" in info.value.message  # as loaded: the caches left on the meta device
    assert "older transformers" in info.value.hint


def test_composition_stops_at_the_query_key_value_layout(neox: Path, in_process_sandbox, tmp_path: Path) -> None:
    from onboard.generate_adapter import generate
    from onboard.generate_adapter.weight_inference import AmbiguousWeights

    with pytest.raises(AmbiguousWeights, match=r"attention\.query_key_value\.weight: rows grouped per KV head"):
        generate(neox, tmp_path / "out", parity=True, policy=TRUSTED)
    assert not in_process_sandbox  # stopped before any reference run


def test_with_the_layout_it_composes_partial_rotary_and_parity_is_unverified(
    neox: Path, in_process_sandbox, layout_known, tmp_path: Path
) -> None:
    """No stub (the stored masks are dropped, inv_freq too); rotary_pct / rotary_emb_base read through the config
    layer; parity unverified: the reference is unusable, naming its error; against transformers' own GPT-NeoX it passes."""
    import torch
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    from onboard.generate_adapter import generate
    from onboard.generate_adapter.parity import check_parity, load_adapter
    from onboard.names.tensors import classify

    result = generate(neox, tmp_path / "out", parity=True, policy=TRUSTED)
    assert result.stubs == ()
    assert result.parity["status"] == "unverified" and REMOVED_API in result.parity["detail"], result.parity
    assert (result.parity["verdict"], result.parity["cause"]) == ("reference-unusable", "forward (GPTNeoXForCausalLM)")
    assert classify("gpt_neox.layers.{}.attention.masked_bias")[0] == "drop"
    assert classify("gpt_neox.layers.{}.attention.dense.bias")[0] != "drop"

    adapter_file = tmp_path / "out" / "adapters" / "legacy_gpt_neox.py"
    assert "query_key_value='grouped'" in adapter_file.read_text()
    adapter = load_adapter(adapter_file).Model.from_pretrained(neox, dtype=torch.float32, trust_remote_code=False)
    assert (adapter.args.partial_rotary_factor, adapter.args.rope_theta) == (ROTARY_PCT, ROTARY_BASE)

    # transformers' own GPT-NeoX (not repository code) on the same tensors, 4.30.2's embed_out as lm_head
    from safetensors.torch import load_file

    doc = json.loads((neox / "config.json").read_text())
    native = GPTNeoXForCausalLM(GPTNeoXConfig(**{k: v for k, v in doc.items() if k not in ("auto_map", "model_type")}))
    state = {"lm_head.weight" if k == "embed_out.weight" else k: v for k, v in load_file(neox / "model.safetensors").items()}  # fmt: skip
    assert native.load_state_dict(state, strict=False).missing_keys == []
    parity = check_parity(adapter_file, neox, policy=TRUSTED, reference=native.eval())
    assert parity["status"] == "passed", parity["detail"]
