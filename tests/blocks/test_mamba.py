"""Mamba-1 vs transformers' MambaMixer, FalconMambaMixer (weightless RMS norms on dt, B, C) and JambaMambaMixer
(weighted ones), float32: a full prefix (transformers' sequential scan), each option shown to matter; a left-padded
row against the row alone and cached decoding against the whole sequence; bfloat16 against transformers' own
bfloat16 run."""

from __future__ import annotations

import importlib

import pytest
import torch

from onboard.blocks.mamba import MambaMixer
from tests.blocks._hf import bfloat16_errors, check_padding_and_decoding, randomize

B, S, HIDDEN, INTER, STATE, RANK = 2, 11, 32, 64, 8, 4
MIXERS = {
    "mamba": ("MambaMixer", None, {"state_size": STATE, "time_step_rank": RANK, "expand": 2, "conv_kernel": 4}),
    "falcon_mamba": ("FalconMambaMixer", "weightless",
                     {"state_size": STATE, "time_step_rank": RANK, "expand": 2, "conv_kernel": 4, "mixer_rms_eps": 1e-6}),
    "jamba": ("JambaMambaMixer", "weighted",
              {"mamba_d_state": STATE, "mamba_dt_rank": RANK, "mamba_expand": 2, "mamba_d_conv": 4}),
}  # fmt: skip


def _pair(family: str, dtype: torch.dtype = torch.float32) -> tuple[MambaMixer, torch.nn.Module]:
    from transformers import AutoConfig

    name, bc_norm, dims = MIXERS[family]
    cfg = AutoConfig.for_model(family, hidden_size=HIDDEN, num_hidden_layers=1, intermediate_size=INTER, **dims)
    module = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
    # transformers' own weight init reads Falcon-Mamba's norms before making them: skipped (all is randomised)
    init = {"initialize_mixer_weights": False} if family == "falcon_mamba" else {}
    hf = getattr(module, name)(cfg, 0, **init).eval()
    randomize(hf, std=0.3)
    with torch.no_grad():  # decays between exp(-e) and exp(-1/e) per unit of dt
        hf.A_log.copy_(torch.linspace(-1.0, 1.0, INTER * STATE).reshape(INTER, STATE))
    eps = cfg.mixer_rms_eps if family == "falcon_mamba" else getattr(cfg, "rms_norm_eps", 1e-6)
    ours = MambaMixer(HIDDEN, INTER, STATE, RANK, 4, bc_norm=bc_norm, norm_eps=eps)
    state = {k: v for k, v in hf.state_dict().items() if not (bc_norm == "weightless" and "layernorm" in k)}
    ours.load_state_dict(state, strict=True)
    return ours.to(dtype), hf.to(dtype)


def _x(dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(B, S, HIDDEN, generator=torch.Generator().manual_seed(4)).to(dtype)


@pytest.mark.parametrize("family", sorted(MIXERS))
def test_mamba_equals_transformers(family: str) -> None:
    ours, hf = _pair(family)
    with torch.no_grad():
        expected = hf(_x())
        assert expected.abs().max() > 0.1  # a real signal, not a zero state
        torch.testing.assert_close(ours(_x(), None, None), expected, atol=1e-5, rtol=1e-5)
        if ours.bc_norm is not None:  # the norms on dt, B and C are what is compared
            ours.bc_norm = None
            assert (ours(_x(), None, None) - expected).abs().max() > 1e-3
        ours.A_log.add_(1.0)  # another decay: the recurrence is what is compared
        assert (ours(_x(), None, None) - expected).abs().max() > 1e-3


def test_bfloat16_matches_transformers_bfloat16() -> None:
    """In bfloat16 (dt's softplus and h C in bfloat16, the state in float32, as transformers) our error against
    float32 is within the noise of transformers' own bfloat16 run."""
    ours, hf = _pair("mamba", torch.bfloat16)
    exact, _ = _pair("mamba")
    ours_error, hf_error = bfloat16_errors(ours, hf, exact, _x())
    assert 0 < hf_error and ours_error <= 1.5 * hf_error, (ours_error, hf_error)


def test_padding_and_cached_decoding() -> None:
    ours, _ = _pair("jamba")
    cache = check_padding_and_decoding(ours, _x(), pad=5, prefix=6)
    assert cache.recurrent_state.shape == (B, INTER, STATE) and cache.conv_state.shape == (B, INTER, 3)
