"""Worked example: an architecture variant that stores one tensor under a new name needs ONE data entry in
onboard/names/tensors.py, and nothing else.

The variant: Llama with its MLP's down projection stored as `mlp.out_proj` (a name no pattern knows). Before the
entry, composition cannot map it: the tensor becomes a kernel stub and the MLP has no down projection. The entry:

    (rf"{_MLP}\\.out_proj{_P}", "mlp.down"),

one row added to LAYER_PATTERNS (here through `add_pattern`, which edits the table as a maintainer would and
recompiles it). After it, generate composes the adapter with no stub, its logits on the variant match transformers'
Llama on the same weights under their original names, and inspect counts the tensor under the role's component.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from onboard.names import tensors

ENTRY = (rf"{tensors._MLP}\.out_proj{tensors._P}", "mlp.down")
"""The one data entry the variant needs, as it would be written in LAYER_PATTERNS."""


@contextmanager
def add_pattern(entry: tuple[str, str]) -> Iterator[None]:
    """LAYER_PATTERNS with `entry` appended (the edit), recompiled; classification caches cleared around it."""
    from onboard.inspect_checkpoint import tensor_names

    with pytest.MonkeyPatch.context() as patch:
        patterns = (*tensors.LAYER_PATTERNS, entry)
        patch.setattr(tensors, "LAYER_PATTERNS", patterns)
        patch.setattr(tensors, "_LAYER_ROLES", tuple((tensors.re.compile(p), role) for p, role in patterns))
        tensor_names.component_of_template.cache_clear()
        tensor_names.layer_role.cache_clear()
        try:
            yield
        finally:
            tensor_names.component_of_template.cache_clear()
            tensor_names.layer_role.cache_clear()


def _variant(tiny, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    """tiny llama with every `mlp.down_proj` stored as `mlp.out_proj`."""
    from safetensors.torch import load_file, save_file

    ckpt = shutil.copytree(tiny("llama"), tmp_path / "variant")
    tensors_ = load_file(str(ckpt / "model.safetensors"))
    renamed = {name.replace("mlp.down_proj", "mlp.out_proj"): t for name, t in tensors_.items()}
    save_file(renamed, str(ckpt / "model.safetensors"), metadata={"format": "pt"})
    return ckpt


def test_a_new_tensor_name_is_one_data_entry(tiny, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import torch

    from onboard.generate_adapter import generate
    from onboard.generate_adapter.parity import check_parity, reference_model
    from onboard.generate_adapter.plan import plan
    from onboard.inspect_checkpoint import inspect

    ckpt = _variant(tiny, tmp_path)
    before = plan(inspect(str(ckpt)))
    assert {stub.op for stub in before.stubs} >= {"mlp_out_proj"}, before.stubs  # unknown: a stub, never a guess

    with add_pattern(ENTRY):
        profile = inspect(str(ckpt))
        assert plan(profile).stubs == ()
        assert profile.parameters is not None and profile.parameters.by_component["mlp"] > 0
        result = generate(profile, tmp_path / "out")
        assert result.passed, [c.detail for c in result.checks]
        adapter = tmp_path / "out/adapters/llama.py"
        assert "model.layers.{i}.mlp.out_proj.weight" in adapter.read_text()
        # transformers' Llama reads the same weights under their original names
        reference = reference_model(tiny("llama"), torch.float32)
        report = check_parity(adapter, ckpt, "float32", reference=reference)
        assert report["passed"], report["detail"]
