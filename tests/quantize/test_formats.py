"""Each format against an independent computation: the gguf package's quantizers and dequantizers, a line-by-line
transliteration of llama.cpp's reference C, or a hand-worked example."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType
from gguf.quants import dequantize, quantize

from onboard.quantize import ggml_kquants as ggml
from onboard.quantize import numerics
from onboard.quantize.formats import FORMATS, parse_formats
from tests.quantize.ggml_reference import pack_q4_k, pack_q6_k, scalar_q4_k, scalar_q6_k


def _rows(seed: int, rows: int = 4, cols: int = 512, std: float = 0.02) -> torch.Tensor:
    """Trained-like rows: small values, an outlier, a zero sub-block, an all-zero super-block."""
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(rows, cols, generator=g) * std
    w[0, 7] = 0.6
    w[1, 40:72] = 0.0
    w[2, 256:512] = 0.0
    return w


@pytest.mark.parametrize("seed", [0, 1])
def test_q6_k_matches_the_c_reference_and_gguf_storage(seed: int) -> None:
    w = _rows(seed)
    parts = ggml.q6_k_parts(w)
    ours = ggml.q6_k_dequant(parts).reshape(-1).numpy()
    assert np.array_equal(ours, scalar_q6_k(w.reshape(-1).numpy()))
    stored = pack_q6_k(parts.d.numpy(), parts.scales.numpy(), parts.q.numpy())
    assert np.array_equal(dequantize(stored, GGMLQuantizationType.Q6_K).reshape(-1), ours)
    assert np.abs(ours - w.reshape(-1).numpy()).max() < 0.02


@pytest.mark.parametrize("seed", [0, 1])
def test_q4_k_matches_the_c_reference_and_gguf_storage(seed: int) -> None:
    w = _rows(seed)
    parts = ggml.q4_k_parts(w)
    ours = ggml.q4_k_dequant(parts).reshape(-1).numpy()
    assert np.array_equal(ours, scalar_q4_k(w.reshape(-1).numpy()))
    stored = pack_q4_k(parts.d.numpy(), parts.dmin.numpy(), parts.scales.numpy(), parts.mins.numpy(), parts.q.numpy())
    assert np.array_equal(dequantize(stored, GGMLQuantizationType.Q4_K).reshape(-1), ours)


def test_k_quants_on_a_constant_block_stay_within_a_step_of_the_c_reference() -> None:
    # Every candidate scale fits a constant block equally well: which one wins depends on the last bit of float
    # sums, so the values may differ by a fraction of a step, never more.
    w = torch.full((1, 256), 0.01)
    for ours, reference in (
        (ggml.q6_k(w), scalar_q6_k(w.reshape(-1).numpy())),
        (ggml.q4_k(w), scalar_q4_k(w.reshape(-1).numpy())),
    ):
        assert np.abs(ours.reshape(-1).numpy() - reference).max() < 0.01 / 16


@pytest.mark.parametrize(
    "name,qtype",
    [("q8_0", "Q8_0"), ("mxfp4", "MXFP4"), ("q5_0", "Q5_0"), ("q5_1", "Q5_1"), ("q4_1", "Q4_1"), ("q4_0", "Q4_0")],
)
def test_block_formats_equal_gguf_quantize_dequantize(name: str, qtype: str) -> None:
    w = _rows(2, cols=256)
    w[0, :32] = torch.tensor([0.25, 0.75, 1.25, -1.75, 2.5, -3.5, 5.0, 0.0] * 4)  # MXFP4 ties at amax 5 -> scale 1
    expected = dequantize(quantize(w.numpy(), GGMLQuantizationType[qtype]), GGMLQuantizationType[qtype])
    assert np.array_equal(FORMATS[name].quantize(w).numpy(), expected)


def test_int8_per_channel_hand_worked() -> None:
    # amax 1.275 -> scale 1.275 / 127.5 = 0.01 (compressed-tensors' symmetric range): 127.5 rounds to 128, clamps to 127
    w = torch.tensor([[1.275, -0.51, 0.0051, 0.0]])
    assert torch.allclose(numerics.int8_per_channel(w), torch.tensor([[1.27, -0.51, 0.01, 0.0]]), atol=1e-6)


def test_fp8_rounds_to_e4m3_grid_hand_worked() -> None:
    # scale = 4.48 / 448 = 0.01; 0.3 -> e4m3 0.3125 (step 1/32 in [0.25, 0.5)), 17 -> 16 (step 2 in [16, 32): tie to even)
    w = torch.tensor([[4.48, 0.003, 0.17, -0.0001]])
    out = numerics.fp8_per_tensor(w) / 0.01
    assert torch.allclose(out, torch.tensor([[448.0, 0.3125, 16.0, -0.009765625]]), rtol=1e-5)


def test_fp8_block_scales_each_128x128_block() -> None:
    w = torch.zeros(256, 256)
    w[0, 0], w[0, 1] = 448.0, 0.3  # block (0, 0): scale 1
    w[200, 200], w[200, 201] = 4.48, 0.003  # block (1, 1): scale 0.01
    out = numerics.fp8_block(w)
    assert out[0, 1] == pytest.approx(0.3125) and out[200, 201] == pytest.approx(0.003125, rel=1e-5)


def test_int4_group_asymmetric_hand_worked() -> None:
    # group min -1, max 2: scale 3 / 15 = 0.2 (stored fp16 0.199951...), zero round(1 / 0.2) = 5;
    # 0.5 / 0.2 = 2.5 rounds to 2 (half to even) -> (2 + 5 - 5) * 0.199951 = 0.399902
    w = torch.zeros(1, 128)
    w[0, :3] = torch.tensor([-1.0, 2.0, 0.5])
    out = numerics.int4_group_asym(w)
    fp16_scale = float(torch.tensor(0.2).half())
    assert out[0, 2] == pytest.approx(2 * fp16_scale) and out[0, 0] == pytest.approx(-5 * fp16_scale)


def test_activation_rounding_hand_worked() -> None:
    x = torch.tensor([[1.27, -0.635, 0.004]])  # per-token scale 1.27 / 127 = 0.01
    assert torch.allclose(numerics.int8_per_token(x), torch.tensor([[1.27, -0.64, 0.0]]), atol=1e-6)
    block = torch.zeros(1, 256)
    block[0, 0], block[0, 1] = -2.54, 0.011  # Q8_K: iscale = -127 / -2.54 = 50 -> 0.55 -> 1 (half to even: 0.55 > .5)
    assert ggml.q8_k_activation(block)[0, 1] == pytest.approx(0.02)


def test_bytes_and_llama_cpp_fallbacks() -> None:
    assert FORMATS["q4_k"].nbytes((10, 256)) == 10 * 144
    assert FORMATS["q4_k"].resolve((10, 192)).name == "q5_0" and FORMATS["q4_k"].nbytes((10, 192)) == 10 * 6 * 22
    assert FORMATS["q6_k"].resolve((10, 192)).name == "q8_0"
    assert FORMATS["q6_k"].resolve((10, 48)).name == "f16"
    assert FORMATS["mxfp4"].nbytes((4, 64)) == 4 * 2 * 17
    assert [FORMATS[n].nbytes((1, 32)) for n in ("q5_1", "q4_1", "q4_0")] == [24, 20, 18]
    assert FORMATS["int4-g128"].nbytes((2, 256)) == 2 * 2 * 66.5
    assert FORMATS["fp8-block"].nbytes((130, 256)) == 130 * 256 + 2 * 2 * 4
    assert not FORMATS["int4-g128"].applies((8, 192)) and not FORMATS["q8_0"].applies((8, 48))


def test_parse_formats() -> None:
    assert parse_formats("llama.cpp") == ("mxfp4", "q8_0", "q6_k", "q5_1", "q4_k", "q4_1", "q4_0", "q3_k")
    assert parse_formats("q4_k, int8") == ("int8", "q4_k")
    from onboard.errors import InputError

    with pytest.raises(InputError, match="unknown format 'q2_k'"):
        parse_formats("q2_k")
