"""Goldens of a day-zero checkpoint: refused without --trust-remote-code (naming the command), recorded from the
repository's own code through the sandbox contract with it, and saying which code produced them."""

from __future__ import annotations

import pytest

from onboard.errors import InputError
from onboard.reference import RemoteCodePolicy
from onboard.validate_serving.golden import read_golden, record


def test_goldens_need_the_flag(dayzero, tmp_path) -> None:
    fixture = dayzero("llama")
    with pytest.raises(InputError) as info:
        record(str(fixture.path), tmp_path / "golden")
    assert "exists only as the repository's code" in info.value.message
    assert f"onboard golden record {fixture.path} --out {tmp_path / 'golden'} --trust-remote-code" in info.value.hint
    assert not (tmp_path / "golden").exists() and fixture.imported() == []


def test_goldens_from_the_repository_code(dayzero, in_process_sandbox, tmp_path) -> None:
    from onboard.sandbox import code_hash

    fixture = dayzero("llama")
    out = tmp_path / "golden"
    golden = record(str(fixture.path), out, policy=RemoteCodePolicy(trust_remote_code=True), calibrate=("float32",),
                    max_long_tokens=64)  # fmt: skip
    assert [c["target"] for c in in_process_sandbox] == ["onboard.validate_serving.golden:record_in_worker"]
    on_disk = read_golden(out)
    reference = on_disk.manifest["reference"]
    assert reference["identity"] == f"repository code sha256:{code_hash(fixture.path)}"
    assert reference["library"] == "repository code" and reference["code_sha256"] == code_hash(fixture.path)
    assert reference["isolation"] in ("bubblewrap", "unavailable")  # what this machine would use
    assert on_disk.manifest["source"] == str(fixture.path) and on_disk.manifest["model_type"] == "dayzero_llama"
    assert len(on_disk.prompts) == len(golden.prompts) > 0 and "float32" in on_disk.manifest["noise"]
