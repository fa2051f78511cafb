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

GGML_FORMATS = sorted(n for n, f in FORMATS.items() if f.engine == LLAMA_CPP and f.ggml_type and f.block > 1
                      and not f.native_only)  # fmt: skip
# No torch port: the library is the only quantizer, so the checks are on what it stores (usable() gates them).
LIBRARY_ONLY = sorted(n for n, f in FORMATS.items() if f.native_only)


def _trained_like(rows: int, cols: int, seed: int) -> torch.Tensor:
    """Small values with heavy-tailed rows, an outlier, a zero sub-block and an all-zero super-block."""
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(rows, cols, generator=g) * 0.02 * torch.rand(rows, 1, generator=g).add(0.2)
    w[0, 7] = 0.6
    w[1, 40:72] = 0.0
    w[2, :256] = 0.0
    return w


@pytest.fixture(scope="module")
def llamacpp_library() -> None:
    require_llamacpp()
    if ggml_native.library_path() is None:
        pytest.fail("llama.cpp is installed but its libggml-base.so was not found under the virtualenv")


@pytest.mark.parametrize("name", GGML_FORMATS)
def test_the_library_and_the_port_store_the_same_values(llamacpp_library: None, name: str) -> None:
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


def test_a_type_the_library_stores_differently_is_not_used(llamacpp_library: None) -> None:
    w = _trained_like(4, 512, seed=0)
    assert ggml_native.quantize(w, "q4_K", 256, 144) is not None
    assert ggml_native.quantize(w, "q4_K", 256, 143) is None  # bytes per block differ from ggml's
    assert ggml_native.quantize(w, "q4_K", 32, 144) is None  # block size differs
    assert ggml_native.quantize(w, "no_such_type", 32, 18) is None
    assert ggml_native.quantize(w[:, :500], "q8_0", 32, 34) is None  # a row that is not whole blocks
    assert ggml_native.quantize(w.to("meta"), "q8_0", 32, 34) is None  # not in host memory: the port, not C, reads it


def test_disabling_the_library_falls_back_to_the_port(llamacpp_library: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ggml_native.DISABLE_ENV, "0")
    ggml_native._library.cache_clear()
    try:
        assert ggml_native.quantize(_trained_like(4, 512, seed=0), "q8_0", 32, 34) is None
        assert "torch port" in ggml_native.describe() and "ONBOARD_GGML_NATIVE=0" in ggml_native.describe()
    finally:
        ggml_native._library.cache_clear()
    monkeypatch.delenv(ggml_native.DISABLE_ENV)
    assert "llama.cpp's own quantizers" in ggml_native.describe()


@pytest.mark.parametrize("name", LIBRARY_ONLY)
def test_a_library_only_format_rounds_through_the_library(llamacpp_library: None, name: str) -> None:
    fmt = FORMATS[name]
    w = _trained_like(96, 1024, seed=7)
    out = fmt.quantize(w)
    assert out.shape == w.shape and out.dtype == torch.float32 and torch.isfinite(out).all()
    assert not torch.equal(out, w)
    # Coarser than Q4_K / Q4_0 at Q3_K's 3.44 bits, finer than nothing; IQ4_NL (4.5 bits) about Q4_0's.
    error = {n: float((FORMATS[n].quantize(w) - w).pow(2).mean() / w.pow(2).mean()) for n in ("q4_k", "q4_0", name)}
    if name == "q3_k":
        assert error["q4_k"] < error["q3_k"] < 0.1, error
    else:
        assert error[name] < 1.5 * error["q4_0"], error
    with pytest.raises(RuntimeError, match="llama.cpp's own quantizers"):
        fmt.weight(w)  # never a silent stand-in


def test_q3_k_falls_back_to_iq4_nl_on_rows_not_of_256() -> None:
    assert FORMATS["q3_k"].resolve((8, 192)) is FORMATS["iq4_nl"]
    assert FORMATS["q3_k"].resolve((8, 512)) is FORMATS["q3_k"]
    assert FORMATS["q3_k"].nbytes((8, 512)) == 8 * 2 * 110 and FORMATS["q3_k"].nbytes((8, 192)) == 8 * 6 * 18


def test_without_the_library_a_plan_leaves_q3_k_out_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    from onboard.quantize.formats import usable

    monkeypatch.setenv(ggml_native.DISABLE_ENV, "0")
    ggml_native._library.cache_clear()
    try:
        kept, left_out = usable(("q8_0", "q4_k", "q3_k"))
    finally:
        ggml_native._library.cache_clear()
    assert kept == ("q8_0", "q4_k") and set(left_out) == {"q3_k"}
    assert (
        "needs q3_k and iq4_nl from llama.cpp's own quantizers" in left_out["q3_k"]
        and "install_llama_cpp.sh" in left_out["q3_k"]
    )
    assert "ONBOARD_GGML_NATIVE=0" in left_out["q3_k"]


def test_the_type_ids_are_ggufs_and_the_package_is_not_imported() -> None:
    """GGML_TYPE_IDS equals gguf's enum for every llama.cpp format; asking the library imports no gguf package (its
    __init__ imports mistral_common: ~0.35 s inside a sweep)."""
    import subprocess
    import sys

    from gguf import GGMLQuantizationType

    assert {f.ggml_type.lower() for f in FORMATS.values() if f.engine == LLAMA_CPP and f.block > 1} <= set(
        ggml_native.GGML_TYPE_IDS
    )
    assert all(GGMLQuantizationType[n.upper()].value == i for n, i in ggml_native.GGML_TYPE_IDS.items())
    code = (
        "import sys; from onboard.quantize import ggml_native as g; g.supports('q4_K', 256, 144); "
        "assert 'gguf' not in sys.modules, 'the gguf package was imported'"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
