"""OPT-350m's token embeddings are narrower than its layers (word_embed_proj_dim 512, hidden 1024), brought to the
layers' width by project_in and back by project_out: not a shape mismatch. An embedding of another width without
such a projection still is."""

from __future__ import annotations

from pathlib import Path

from safetensors.torch import load_file, save_file

from onboard.inspect_checkpoint import inspect
from tests.tiny.factory import make_tiny_checkpoint


def _mismatches(ckpt: Path) -> list[str]:
    return [f.message for f in inspect(str(ckpt)).findings if f.code == "shape-mismatch"]


def test_embeddings_projected_to_the_layers_width_are_not_a_mismatch(tmp_path: Path) -> None:
    overrides = {"do_layer_norm_before": False, "word_embed_proj_dim": 16}
    ckpt = make_tiny_checkpoint("opt", tmp_path / "opt350m", overrides=overrides)
    assert _mismatches(ckpt) == []
    # Without project_in, the same 16-wide embedding cannot feed 64-wide layers: an error naming the tensor.
    path = ckpt / "model.safetensors"
    tensors = load_file(str(path))
    assert tensors.pop("model.decoder.project_in.weight").shape == (64, 16)
    save_file(tensors, str(path), metadata={"format": "pt"})
    assert _mismatches(ckpt) == ["model.decoder.embed_tokens.weight has 16 columns but hidden_size is 64"]
