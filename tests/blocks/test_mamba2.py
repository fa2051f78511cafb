"""Mamba-2 vs transformers' BambaMixer and GraniteMoeHybridMambaLayer, float32, 2 B/C groups over 4 heads: a full
prefix (transformers' chunked SSD scan against our token-by-token recurrence), a left-padded row against the row
alone, and cached decoding (convolution and recurrent state) against the whole sequence; then bfloat16 against
transformers' own bfloat16 run."""

from __future__ import annotations

import importlib

import pytest
import torch

from onboard.blocks.mamba2 import Mamba2Mixer
from tests.blocks._hf import bfloat16_errors, check_padding_and_decoding, randomize

B, S, HIDDEN = 2, 11, 32
DIMS = {"mamba_n_heads": 4, "mamba_d_head": 16, "mamba_n_groups": 2, "mamba_d_state": 8, "mamba_d_conv": 4,
        "mamba_expand": 2, "mamba_chunk_size": 4}  # fmt: skip
MIXERS = {"bamba": ("bamba", "BambaMixer"), "granitemoehybrid": ("granitemoehybrid", "GraniteMoeHybridMambaLayer")}


def _pair(family: str, dtype: torch.dtype = torch.float32, **extra: object) -> tuple[Mamba2Mixer, torch.nn.Module]:
    from transformers import AutoConfig

    cfg = AutoConfig.for_model(family, hidden_size=HIDDEN, num_hidden_layers=1, num_attention_heads=4,
                               num_key_value_heads=2, **DIMS, **extra)  # fmt: skip
    folder, name = MIXERS[family]
    hf = getattr(importlib.import_module(f"transformers.models.{folder}.modeling_{folder}"), name)(cfg, 0).eval()
    randomize(hf, std=0.3)
    with torch.no_grad():
        hf.A_log.copy_(torch.linspace(-1.0, 1.0, 4))  # decays between exp(-e) and exp(-1/e) per unit of dt
    ours = Mamba2Mixer(HIDDEN, 4, 16, 8, 2, 4, norm_eps=cfg.rms_norm_eps, time_step_limit=cfg.time_step_limit)
    ours.load_state_dict(hf.state_dict(), strict=True)
    return ours.to(dtype), hf.to(dtype)


def _x(dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(B, S, HIDDEN, generator=torch.Generator().manual_seed(4)).to(dtype)


@pytest.mark.parametrize("family", sorted(MIXERS))
def test_mamba2_equals_transformers(family: str) -> None:
    ours, hf = _pair(family)
    with torch.no_grad():
        expected = hf(_x())
        assert expected.abs().max() > 0.1  # a real signal, not a zero state
        torch.testing.assert_close(ours(_x(), None, None), expected, atol=1e-5, rtol=1e-5)
        ours.A_log.add_(1.0)  # another decay: the recurrence is what is compared
        assert (ours(_x(), None, None) - expected).abs().max() > 1e-3


def test_time_step_limit_clamps() -> None:
    ours, hf = _pair("bamba", time_step_limit=(0.0, 0.1))
    with torch.no_grad():
        torch.testing.assert_close(ours(_x(), None, None), hf(_x()), atol=1e-5, rtol=1e-5)
        ours.time_step_limit = (0.0, float("inf"))
        assert (ours(_x(), None, None) - hf(_x())).abs().max() > 1e-3


def test_bfloat16_matches_transformers_bfloat16() -> None:
    """In bfloat16 (dt's softplus in bfloat16, the scan in float32, as transformers) our error against float32 is
    within the noise of transformers' own bfloat16 run."""
    ours, hf = _pair("bamba", torch.bfloat16)
    exact, _ = _pair("bamba")
    ours_error, hf_error = bfloat16_errors(ours, hf, exact, _x())
    assert 0 < hf_error and ours_error <= 1.5 * hf_error, (ours_error, hf_error)


def test_padding_and_cached_decoding() -> None:
    ours, _ = _pair("bamba")
    cache = check_padding_and_decoding(ours, _x(), pad=5, prefix=6)
    assert cache.recurrent_state.shape == (B, 4, 16, 8) and cache.conv_state.shape == (B, 64 + 32, 3)


@pytest.mark.parametrize("rms_norm, before_gate", [(True, False), (True, True), (False, False)])
def test_falcon_h1_mixer_options_equal_transformers(rms_norm: bool, before_gate: bool) -> None:
    """Falcon-H1's mixer: input multiplier, muP multipliers over in_proj's z, x, B, C and dt, the gated norm optional
    and in either order, and an out_proj bias of its own (projectors_bias), against FalconH1Mixer."""
    from transformers import AutoConfig
    from transformers.models.falcon_h1.modeling_falcon_h1 import FalconH1Mixer, compute_mup_vector

    multipliers = [0.35, 0.25, 0.5, 0.5, 0.7]
    cfg = AutoConfig.for_model("falcon_h1", hidden_size=HIDDEN, num_hidden_layers=1, num_attention_heads=4,
                               num_key_value_heads=2, mamba_n_heads=4, mamba_d_head=16, mamba_d_ssm=64,
                               mamba_n_groups=2, mamba_d_state=8, mamba_d_conv=4, mamba_chunk_size=4,
                               mamba_rms_norm=rms_norm, mamba_norm_before_gate=before_gate, ssm_in_multiplier=1.25,
                               ssm_multipliers=multipliers, projectors_bias=True)  # fmt: skip
    hf = FalconH1Mixer(cfg, 0).eval()
    hf.register_buffer("mup_vector", compute_mup_vector(cfg), persistent=False)
    randomize(hf, std=0.3)
    with torch.no_grad():
        hf.A_log.copy_(torch.linspace(-1.0, 1.0, 4))
    ours = Mamba2Mixer(HIDDEN, 4, 16, 8, 2, 4, norm_eps=cfg.rms_norm_eps, time_step_limit=cfg.time_step_limit,
                       gated_norm=rms_norm, norm_before_gate=before_gate, in_multiplier=1.25,
                       zxbcdt_multipliers=multipliers, out_bias=True)  # fmt: skip
    ours.load_state_dict(hf.state_dict(), strict=True)
    with torch.no_grad():
        expected = hf(_x())
        assert expected.abs().max() > 0.1
        torch.testing.assert_close(ours(_x(), None, None), expected, atol=1e-5, rtol=1e-5)
        ours.zxbcdt_multipliers = None  # without the muP vector: another output
        assert (ours(_x(), None, None) - expected).abs().max() > 1e-3
