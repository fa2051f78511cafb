"""The day-zero fixtures are what they claim: repository code under a new model_type that loads only with
trust_remote_code=True, computes exactly what the family's transformers implementation computes, and records
every import in its canary."""

from __future__ import annotations

import json

import pytest

from tests.dayzero.builder import ACCEPTANCE, CANARY_ENV, FAMILIES, native_config, native_state_dict


@pytest.mark.parametrize("family", ACCEPTANCE)
def test_fixture_loads_as_remote_code_only(family: str, dayzero, tmp_path, monkeypatch) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    fixture = dayzero(family)
    config = json.loads((fixture.path / "config.json").read_text())
    assert config["model_type"] == f"dayzero_{family}" and set(config["auto_map"]) == {"AutoConfig",
                                                                                          "AutoModelForCausalLM"}  # fmt: skip
    assert sorted(p.name for p in fixture.path.glob("*.py")) == [
        f"configuration_dayzero_{family}.py", f"modeling_dayzero_{family}.py"]  # fmt: skip
    with pytest.raises(ValueError):  # transformers itself does not know the model_type
        AutoModelForCausalLM.from_pretrained(fixture.path, trust_remote_code=False)
    assert fixture.imported() == []

    redirected = tmp_path / "canary"
    monkeypatch.setenv(CANARY_ENV, str(redirected))
    remote = AutoModelForCausalLM.from_pretrained(fixture.path, trust_remote_code=True, attn_implementation="eager")
    assert type(remote).__name__ == f"{FAMILIES[family].new_prefix}ForCausalLM"
    assert {line.rsplit(".", 1)[-1] for line in redirected.read_text().splitlines()} == {
        f"configuration_dayzero_{family}", f"modeling_dayzero_{family}"}  # fmt: skip
    native = AutoModelForCausalLM.from_config(native_config(FAMILIES[family]), attn_implementation="eager")
    native.load_state_dict(native_state_dict(native.config, seed=0), strict=False)
    native.tie_weights()
    ids = torch.randint(0, native.config.vocab_size, (1, 40), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ours, theirs = remote.eval()(ids).logits, native.eval()(ids).logits
    assert torch.equal(ours, theirs)
    # Trained-like magnitudes: a peaked next-token distribution, not near-uniform logits.
    assert float(theirs.abs().max()) > 5.0 and float(theirs.std()) > 1.0
    assert fixture.imported() == []  # the session canary saw nothing: the redirect caught the imports
