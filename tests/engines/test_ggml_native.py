"""quantize-plan's llama.cpp formats through llama.cpp's own library (ggml_native) against the torch port.

The library is the engine's truth (llama-quantize calls the same ggml_quantize_chunk). The port is what a machine
without llama.cpp uses: it must store the same values, so a plan measured there is the plan llama.cpp serves.
"""

from __future__ import annotations

import pytest
import torch

from onboard.quantize import ggml_native
from onboard.quantize.formats import FORMATS, LLAMA_CPP
from tests.engines.conftest import require_llamacpp

GGML_FORMATS = sorted(n for n, f in FORMATS.items() if f.engine == LLAMA_CPP and f.ggml_type and f.block > 1)


def _trained_like(rows: int, cols: int, seed: int) -> torch.Tensor:
    """Small values with heavy-tailed rows, an outlier, a zero sub-block and an all-zero super-block."""
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(rows, cols, generator=g) * 0.02 * torch.rand(rows, 1, generator=g).add(0.2)
    w[0, 7] = 0.6
    w[1, 40:72] = 0.0
    w[2, :256] = 0.0
    return w


@pytest.fixture(scope="module")
def native() -> None:
    require_llamacpp()
    if ggml_native.library_path() is None:
        pytest.fail("llama.cpp is installed but its libggml-base.so was not found under the virtualenv")


@pytest.mark.parametrize("name", GGML_FORMATS)
def test_the_library_and_the_port_store_the_same_values(native: None, name: str) -> None:
    fmt = FORMATS[name]
    w = _trained_like(96, 1024, seed=GGML_FORMATS.index(name))
    ours = fmt.weight(w)
    theirs = ggml_native.quantize(w, fmt.ggml_type or "", fmt.block, fmt.bytes_per_block)
    assert theirs is not None, f"{fmt.ggml_type}: the library refused a type our table describes"
    assert theirs.shape == w.shape and theirs.dtype == torch.float32
    differing = (ours != theirs).reshape(-1, 32).any(-1)
    if name != "q4_k":
        assert not differing.any(), f"{name}: {int(differing.sum())} sub-blocks differ from llama.cpp's quantizer"
        return
    # Q4_K's scale search compares float32 sums whose order the compiler chose for ggml; the port sums one
    # element after another and differs in about 1 sub-block of 50,000 on trained-like values (measured).
    assert int(differing.sum()) <= 1
    step = (w.reshape(-1, 32).amax(-1) - w.reshape(-1, 32).amin(-1)) / 15
    assert ((ours - theirs).abs().reshape(-1, 32).amax(-1) <= step + 1e-7).all()


def test_a_type_the_library_stores_differently_is_not_used(native: None) -> None:
    w = _trained_like(4, 512, seed=0)
    assert ggml_native.quantize(w, "q4_K", 256, 144) is not None
    assert ggml_native.quantize(w, "q4_K", 256, 143) is None  # bytes per block differ from ggml's
    assert ggml_native.quantize(w, "q4_K", 32, 144) is None  # block size differs
    assert ggml_native.quantize(w, "no_such_type", 32, 18) is None
    assert ggml_native.quantize(w[:, :500], "q8_0", 32, 34) is None  # a row that is not whole blocks
    assert ggml_native.quantize(w.to("meta"), "q8_0", 32, 34) is None  # not in host memory: the port, not C, reads it


def test_disabling_the_library_falls_back_to_the_port(native: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ggml_native.DISABLE_ENV, "0")
    ggml_native._library.cache_clear()
    try:
        assert ggml_native.quantize(_trained_like(4, 512, seed=0), "q8_0", 32, 34) is None
        assert "torch port" in ggml_native.describe() and "ONBOARD_GGML_NATIVE=0" in ggml_native.describe()
    finally:
        ggml_native._library.cache_clear()
    monkeypatch.delenv(ggml_native.DISABLE_ENV)
    assert "llama.cpp's own quantizers" in ggml_native.describe()
