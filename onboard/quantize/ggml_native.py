"""llama.cpp's own quantizers, called in its ggml library through ctypes: a plan's llama.cpp formats then round
exactly as `llama-quantize` does. Loaded only from the llama.cpp install this project made (venvs.llamacpp), never
from a checkpoint; a type is used only where the library stores it as our format table says. Otherwise quantize()
returns None and the caller uses the torch port (ggml_kquants); ONBOARD_GGML_NATIVE=0 forces the port.
"""

from __future__ import annotations

import ctypes
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path
from typing import Any

DISABLE_ENV = "ONBOARD_GGML_NATIVE"
GGML_TYPE_IDS = dict(q4_0=2, q4_1=3, q5_0=6, q5_1=7, q8_0=8, q3_k=11, q4_k=12, q6_k=14, iq4_nl=20, mxfp4=39)
"""GGUF's type ids (the file format's constants, gguf's GGMLQuantizationType): ggml aborts the process on an id it
does not have, so only these are asked, and the name the library answers must match."""
_TO_FLOAT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


class _Traits(ctypes.Structure):
    # struct ggml_type_traits (ggml.h); _type_id's checks catch a layout that moved.
    _fields_ = [
        ("type_name", ctypes.c_char_p),
        ("blck_size", ctypes.c_int64),
        ("blck_size_interleave", ctypes.c_int64),
        ("type_size", ctypes.c_size_t),
        ("is_quantized", ctypes.c_bool),
        ("to_float", ctypes.c_void_p),
        ("from_float_ref", ctypes.c_void_p),
    ]


def library_path() -> Path | None:
    """libggml-base of the llama.cpp install, when there is one."""
    from onboard import venvs

    for candidate in sorted(venvs.llamacpp().glob("lib/python3*/site-packages/llama_cpp/lib/libggml-base.so")):
        return candidate
    return None


_lock = threading.Lock()


@cache
def _library() -> tuple[Path, Any] | None:
    """(its path, the loaded library), or None when disabled, not installed or not a ggml with the calls used here."""
    path = library_path() if os.environ.get(DISABLE_ENV, "1") != "0" else None
    if path is None:
        return None
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    try:
        lib = ctypes.CDLL(str(path))
        lib.ggml_get_type_traits.restype = ctypes.POINTER(_Traits)
        lib.ggml_get_type_traits.argtypes = [ctypes.c_int]
        lib.ggml_quantize_chunk.restype = ctypes.c_size_t
        lib.ggml_quantize_chunk.argtypes = [ctypes.c_int, ptr, ptr, i64, i64, i64, ptr]
        lib.ggml_quantize_requires_imatrix.restype = ctypes.c_bool
        lib.ggml_quantize_requires_imatrix.argtypes = [ctypes.c_int]
    except (OSError, AttributeError):
        return None
    return path, lib


def _loaded() -> Any | None:
    with _lock:  # loaded once, whichever thread asks first
        library = _library()
    return library[1] if library else None


@cache
def _type_id(lib: Any, name: str, block: int, bytes_per_block: float) -> int | None:
    """The type's id when the library stores it as our format table says (else None: do not use it)."""
    type_id = GGML_TYPE_IDS.get(name.lower())
    if type_id is None:
        return None
    traits = lib.ggml_get_type_traits(type_id).contents
    if (traits.type_name or b"").decode().lower() != name.lower():
        return None
    if not traits.is_quantized or not traits.to_float or lib.ggml_quantize_requires_imatrix(type_id):
        return None
    if traits.blck_size != block or traits.type_size != bytes_per_block:
        return None
    return type_id


def describe() -> str:
    """Which quantizer the llama.cpp formats use in this process (for the plan's record)."""
    with _lock:
        library = _library()
    if library is None:
        why = "disabled by ONBOARD_GGML_NATIVE=0" if os.environ.get(DISABLE_ENV) == "0" else "llama.cpp not installed"
        return f"torch port of ggml's reference quantizers ({why})"
    return f"llama.cpp's own quantizers ({library[0]})"


def supports(type_name: str, block: int, bytes_per_block: float) -> bool:
    """The library is there and stores this type as our format table says."""
    lib = _loaded()
    return lib is not None and _type_id(lib, type_name, block, bytes_per_block) is not None


def quantize(w: Any, type_name: str, block: int, bytes_per_block: float) -> Any | None:
    """dequantize(quantize(w)) by the engine's library (float32, w's shape), or None when it cannot be used."""
    import torch

    lib = _loaded()
    if lib is None or w.shape[-1] % block or w.device.type != "cpu":  # the C code reads host memory
        return None
    type_id = _type_id(lib, type_name, block, bytes_per_block)
    if type_id is None:
        return None
    traits = lib.ggml_get_type_traits(type_id).contents
    n_per_row = w.shape[-1]
    source = w.detach().to(torch.float32).contiguous().reshape(-1, n_per_row)
    rows = source.shape[0]
    row_bytes = n_per_row // block * traits.type_size
    packed = torch.empty(rows * row_bytes, dtype=torch.uint8)
    out = torch.empty_like(source)
    to_float = _TO_FLOAT(traits.to_float)

    def run(first: int, last: int) -> None:
        count = last - first
        lib.ggml_quantize_chunk(
            type_id, source.data_ptr(), packed.data_ptr(), first * n_per_row, count, n_per_row, None
        )
        to_float(packed.data_ptr() + first * row_bytes, out.data_ptr() + first * n_per_row * 4, count * n_per_row)

    # One span of rows per torch thread (ctypes releases the GIL): the last in this thread, the others in the pool.
    workers = max(1, min(torch.get_num_threads(), rows))
    bounds = [rows * i // workers for i in range(workers + 1)]
    spans = [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]
    pending = [_pool().submit(run, *span) for span in spans[:-1]]
    run(*spans[-1])
    for future in pending:
        future.result()
    return out.reshape(w.shape)


@cache
def _pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max(1, (os.cpu_count() or 2) - 1), thread_name_prefix="ggml-quantize")
