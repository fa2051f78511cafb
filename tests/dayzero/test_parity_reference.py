"""generate's parity against a day-zero checkpoint: "unverified" without a reference that may run (never a crash,
never "passed"), and against the repository's own code, through the sandbox contract, with --trust-remote-code."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from onboard.generate_adapter.parity import check_parity
from onboard.reference import RemoteCodePolicy

REPO = Path(__file__).resolve().parents[2]
LLAMA_ADAPTER = REPO / "adapters" / "llama.py"  # the dayzero_llama fixture is Llama's code under a new name


def test_repository_code_without_the_flag_is_unverified(dayzero) -> None:
    fixture = dayzero("llama")
    result = check_parity(LLAMA_ADAPTER, fixture.path, rerun="onboard new-model X --trust-remote-code")
    assert result["passed"] is False and result["status"] == "unverified"
    assert result["detail"].startswith("unverified: no reference: model_type 'dayzero_llama' exists only as the "
                                       "repository's code")  # fmt: skip
    assert result["detail"].endswith("rerun with: onboard new-model X --trust-remote-code")
    default = check_parity(LLAMA_ADAPTER, fixture.path)
    assert f"rerun with: onboard generate {fixture.path} --parity --trust-remote-code" in default["detail"]
    assert fixture.imported() == []


def test_unknown_model_type_without_code_is_unverified_not_a_crash(dayzero, tmp_path) -> None:
    fixture = dayzero("llama")
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "model.safetensors").symlink_to(fixture.path / "model.safetensors")
    config = json.loads((fixture.path / "config.json").read_text())
    del config["auto_map"]
    (bare / "config.json").write_text(json.dumps(config))
    result = check_parity(LLAMA_ADAPTER, bare, policy=RemoteCodePolicy(trust_remote_code=True))
    assert result["status"] == "unverified" and result["passed"] is False
    assert "unknown to transformers" in result["detail"] and "no auto_map" in result["detail"]


def test_repository_code_is_the_reference_with_the_flag(dayzero, in_process_sandbox) -> None:
    fixture = dayzero("llama")
    policy = RemoteCodePolicy(trust_remote_code=True)
    result = check_parity(LLAMA_ADAPTER, fixture.path, policy=policy)
    assert result["passed"] is True and result["status"] == "passed", result["detail"]
    assert result["worst"] <= 1e-4
    # The repository's code runs twice, both in the worker: the float32 truth and the float64 run that measures
    # float32's own noise (the comparator's calibration, onboard/comparator.py CALIBRATION).
    assert [(c["target"], c["kwargs"]["dtype"]) for c in in_process_sandbox] == [
        ("onboard.generate_adapter.remote_reference:reference_logits", "float32"),
        ("onboard.generate_adapter.remote_reference:reference_logits", "float64")]  # fmt: skip
    assert result["reference"]["identity"].startswith("repository code sha256:")
    assert fixture.imported() == []  # the stand-in's imports went to its own canary


def test_a_modeling_code_only_defect_fails_parity(dayzero, in_process_sandbox, tmp_path) -> None:
    from tests.dayzero.builder import seed_defect

    seeded = tmp_path / "seeded"
    shutil.copytree(dayzero("llama").path, seeded, symlinks=True)
    # Nothing in config.json or the tensors shows this: only the repository's code computes it.
    seed_defect(seeded, "attn_output = self.o_proj(attn_output)", "attn_output = self.o_proj(attn_output) * 1.05")
    result = check_parity(LLAMA_ADAPTER, seeded, policy=RemoteCodePolicy(trust_remote_code=True))
    assert result["passed"] is False and result["status"] == "failed" and result["worst"] > 1e-3
