"""Gated DeltaNet vs transformers' Qwen3NextGatedDeltaNet (grouped in_proj_qkvz / in_proj_ba, loaded through the
loader's grouped_rows op) and Qwen3_5GatedDeltaNet (separate projections), float32, 2 value heads per key head: a
full prefix (transformers' chunked rule against our token-by-token one), a left-padded row against the row alone,
and cached decoding (convolution and recurrent state) against the whole sequence."""

from __future__ import annotations

import pytest
import torch

from onboard.blocks.deltanet import GatedDeltaNet
from onboard.generate_adapter.loader import _combine
from tests.blocks._hf import check_padding_and_decoding, randomize

B, S, HIDDEN = 2, 11, 32
DIMS = {"linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 8, "linear_value_head_dim": 8,
        "linear_conv_kernel_dim": 4}  # fmt: skip


def _pair(family: str) -> tuple[GatedDeltaNet, torch.nn.Module]:
    import importlib

    from transformers import AutoConfig

    cfg = AutoConfig.for_model(family, hidden_size=HIDDEN, num_hidden_layers=1, layer_types=["linear_attention"],
                               num_attention_heads=4, num_key_value_heads=2, **DIMS)  # fmt: skip
    folder, name = {"qwen3_next": ("qwen3_next", "Qwen3NextGatedDeltaNet"),
                    "qwen3_5_text": ("qwen3_5", "Qwen3_5GatedDeltaNet")}[family]  # fmt: skip
    hf = getattr(importlib.import_module(f"transformers.models.{folder}.modeling_{folder}"), name)(cfg, 0).eval()
    randomize(hf, std=0.3)
    ours = GatedDeltaNet(HIDDEN, 2, 4, 8, 8, 4, norm_eps=cfg.rms_norm_eps)
    state = hf.state_dict()
    if "in_proj_qkvz.weight" in state:  # Qwen3-Next's grouped layout, as the adapter's loader reads it
        for part, source in (("in_proj_qkv", "in_proj_qkvz"), ("in_proj_z", "in_proj_qkvz"),
                             ("in_proj_b", "in_proj_ba"), ("in_proj_a", "in_proj_ba")):  # fmt: skip
            state[f"{part}.weight"] = _combine("grouped_rows", [state[f"{source}.weight"]], ours, part)
        del state["in_proj_qkvz.weight"], state["in_proj_ba.weight"]
    ours.load_state_dict(state, strict=True)
    return ours, hf


def _x() -> torch.Tensor:
    return torch.randn(B, S, HIDDEN, generator=torch.Generator().manual_seed(4))


@pytest.mark.parametrize("family", ["qwen3_next", "qwen3_5_text"])
def test_gated_deltanet_equals_transformers(family: str) -> None:
    ours, hf = _pair(family)
    with torch.no_grad():
        expected = hf(_x())
        torch.testing.assert_close(ours(_x(), None, None), expected, atol=1e-5, rtol=1e-5)
        ours.A_log.add_(1.0)  # another decay: the recurrence is what is compared
        assert (ours(_x(), None, None) - expected).abs().max() > 1e-3


def test_padding_and_cached_decoding() -> None:
    ours, _ = _pair("qwen3_next")
    cache = check_padding_and_decoding(ours, _x(), pad=5, prefix=6)
    assert cache.recurrent_state.shape == (B, 4, 8, 8) and cache.conv_state.shape == (B, 64, 3)


def test_fla_layout_with_negative_eigenvalues_equals_transformers_olmo_hybrid() -> None:
    """OLMo-hybrid's Gated DeltaNet, FLA's layout: separate q / k / v / g / b / a projections and one convolution
    per q / k / v (as its released checkpoints store them), loaded by compose_mixers.FLA_PARTS_OF (q, k, v rows and
    channels concatenated), beta doubled (linear_allow_neg_eigval) and the gated norm at FLA's eps 1e-5 (the
    olmo_hybrid family fact). Without the doubled beta, or at rms_norm_eps, it differs."""
    from transformers import AutoConfig
    from transformers.models.olmo_hybrid.modeling_olmo_hybrid import OlmoHybridGatedDeltaNet

    from onboard.generate_adapter.compose_mixers import FLA_PARTS_OF

    cfg = AutoConfig.for_model("olmo_hybrid", hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=4,
                               num_key_value_heads=2, layer_types=["linear_attention", "full_attention"],
                               linear_allow_neg_eigval=True, **DIMS)  # fmt: skip
    hf = OlmoHybridGatedDeltaNet(cfg, 0).eval()
    randomize(hf, std=0.3)
    state = hf.state_dict()
    key, value = 2 * 8, 4 * 8
    # the released layout: the fused convolution stored as q / k / v parts of the projections' widths
    stored = {k: v for k, v in state.items() if k != "conv1d.weight"}
    for name, part in zip(("q_conv1d", "k_conv1d", "v_conv1d"), state["conv1d.weight"].split([key, key, value])):
        stored[f"{name}.weight"] = part
    loaded = {target: _combine("cat", [stored[f"{s}.weight"] for s in sources])
              for target, sources in FLA_PARTS_OF.items()}  # fmt: skip
    loaded |= {"dt_bias": stored["dt_bias"], "A_log": stored["A_log"]}

    def ours(allow_neg_eigval: bool, eps: float) -> GatedDeltaNet:
        block = GatedDeltaNet(HIDDEN, 2, 4, 8, 8, 4, norm_eps=eps, allow_neg_eigval=allow_neg_eigval)
        block.load_state_dict(loaded, strict=True)
        return block

    with torch.no_grad():
        expected = hf(_x())
        torch.testing.assert_close(ours(True, 1e-5)(_x(), None, None), expected, atol=1e-5, rtol=1e-5)
        assert (ours(False, 1e-5)(_x(), None, None) - expected).abs().max() > 1e-3
        assert (ours(True, cfg.rms_norm_eps)(_x(), None, None) - expected).abs().max() > 1e-3  # 1e-6, not 1e-5
