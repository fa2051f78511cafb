"""Gated DeltaNet's q / k / v convolutions against their projections (consistency.check_conv_channels).

transformers 5.25 saves OLMo-hybrid's fused conv1d cut into three equal parts (Concatenate's reverse, a Chunk with
no sizes), not at the q, k and v widths its released checkpoints use: transformers reads its own save back right,
any other reader convolves the wrong channels. tests/tiny/factory.py writes the released layout; this re-saves it
as transformers would and checks that inspect names each convolution, while transformers' model is unchanged.
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from onboard.inspect_checkpoint import inspect
from tests.tiny.factory import make_tiny_checkpoint


def _logits(ckpt: Path) -> torch.Tensor:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(ckpt, trust_remote_code=False).eval()
    with torch.no_grad():
        return model(torch.tensor([[1, 5, 9, 42, 7, 3]])).logits


def test_convolutions_split_in_equal_thirds_are_a_shape_mismatch(tmp_path: Path) -> None:
    ckpt = make_tiny_checkpoint("olmo_hybrid", tmp_path / "olmo_hybrid")
    assert not [f for f in inspect(str(ckpt)).findings if f.severity in ("error", "fatal")]
    released = _logits(ckpt)
    file = ckpt / "model.safetensors"
    weights = load_file(str(file))
    prefix = "model.layers.0.linear_attn."
    assert [weights[f"{prefix}{x}_proj.weight"].shape[0] for x in "qkv"] == [32, 32, 64]
    fused = torch.cat([weights[f"{prefix}{x}_conv1d.weight"] for x in "qkv"])
    for x, part in zip("qkv", fused.chunk(3), strict=True):  # as transformers 5.25 saves it: 43, 43, 42 channels
        weights[f"{prefix}{x}_conv1d.weight"] = part.clone()
    save_file(weights, str(file), metadata={"format": "pt"})
    assert torch.equal(_logits(ckpt), released)  # transformers concatenates them back: it cannot tell
    errors = [f for f in inspect(str(ckpt)).findings if f.code == "shape-mismatch"]
    assert sorted(f.tensor for f in errors) == [f"{prefix}{x}_conv1d.weight" for x in "kqv"]
    q = next(f for f in errors if f.tensor == f"{prefix}q_conv1d.weight")
    assert "has 43 channels but model.layers.0.linear_attn.q_proj.weight has 32 rows" in q.message
    assert q.severity == "error" and "equal thirds" in q.hint


def test_layer_norms_are_recorded_only_where_layers_differ(tmp_path: Path) -> None:
    # OLMo-hybrid's linear-attention layers are pre-norm, its attention layers post-norm: each layer's stored norms
    # (LayerInfo.norms) let generate compose a placement per layer type; a model whose layers all store the same
    # norms records none (no profile churn).
    layers = inspect(str(make_tiny_checkpoint("olmo_hybrid", tmp_path / "olmo_hybrid"))).layers
    assert [(layer.attention, layer.norms) for layer in layers] == [
        ("linear", ("attention_layer_norm", "feedforward_layer_norm")),
        ("full", ("feedforward_layer_norm", "post_feedforward_layernorm")),
    ]
    assert all(not layer.norms for layer in inspect(str(make_tiny_checkpoint("qwen3", tmp_path / "qwen3"))).layers)
