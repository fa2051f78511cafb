"""llama.cpp's own quantizers, called in its ggml library (libggml-base of the .venv-llamacpp install) through ctypes.

Why: a plan's llama.cpp formats must round exactly as `llama-quantize` does. The engine's library does so by
definition; the torch port (ggml_kquants.py) agrees on Q6_K but differs on a few Q4_K sub-blocks, whose scale
search compares float32 sums in the order the compiler chose. The library is also faster (C, one chunk of rows
per torch thread; ctypes releases the GIL).

Safety: the library is loaded only from the llama.cpp install this project made (scripts/install_llama_cpp.sh,
or ONBOARD_LLAMACPP_VENV), never from a checkpoint. Before a type is used, its block size and bytes per block are
compared with what our format table says; on any difference, or when the library is missing, quantize() returns
None and the caller uses the port. ONBOARD_GGML_NATIVE=0 forces the port (tests compare the two).
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
_TO_FLOAT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


class _Traits(ctypes.Structure):
    # struct ggml_type_traits (ggml.h); the checks in _Library.type_id catch a layout that moved.
    _fields_ = [
        ("type_name", ctypes.c_char_p),
        ("blck_size", ctypes.c_int64),
        ("blck_size_interleave", ctypes.c_int64),
        ("type_size", ctypes.c_size_t),
        ("is_quantized", ctypes.c_bool),
        ("to_float", ctypes.c_void_p),
        ("from_float_ref", ctypes.c_void_p),
    ]


class _Library:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.lib = ctypes.CDLL(str(path))
        self.lib.ggml_get_type_traits.restype = ctypes.POINTER(_Traits)
        self.lib.ggml_get_type_traits.argtypes = [ctypes.c_int]
        self.lib.ggml_quantize_chunk.restype = ctypes.c_size_t
        self.lib.ggml_quantize_chunk.argtypes = [
            ctypes.c_int,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_int64,
            ctypes.c_int64,
            ctypes.c_int64,
            ctypes.c_void_p,
        ]
        self.lib.ggml_quantize_requires_imatrix.restype = ctypes.c_bool
        self.lib.ggml_quantize_requires_imatrix.argtypes = [ctypes.c_int]
        self._checked: dict[tuple[str, int, float], int | None] = {}

    def type_id(self, name: str, block: int, bytes_per_block: float) -> int | None:
        """The type's id when the library stores it as our format table says (else None: do not use it)."""
        key = (name, block, bytes_per_block)
        if key not in self._checked:
            self._checked[key] = self._check(name, block, bytes_per_block)
        return self._checked[key]

    def _check(self, name: str, block: int, bytes_per_block: float) -> int | None:
        # The ids are GGUF's file-format constants (the gguf package's enum); asking ggml for an id it does not
        # have would abort the process, so only these are asked, and the name it answers must match.
        member = _quantization_types().__members__.get(name.upper())
        if member is None:
            return None
        type_id = int(member.value)
        traits = self.lib.ggml_get_type_traits(type_id).contents
        if (traits.type_name or b"").decode().lower() != name.lower():
            return None
        if not traits.is_quantized or not traits.to_float or self.lib.ggml_quantize_requires_imatrix(type_id):
            return None
        if traits.blck_size != block or traits.type_size != bytes_per_block:
            return None
        return type_id


@cache
def _quantization_types() -> Any:
    """The gguf package's GGMLQuantizationType (GGUF's type ids), read from its module gguf/constants.py alone.

    Why: importing the package runs its __init__, which imports its vocabulary module and, through it,
    mistral_common, inside a sweep's first quantization, for one enum; constants.py needs only the standard library.
    The package's own enum when it is imported already, or when constants.py is not where the package keeps it or
    does not load alone."""
    import sys

    if "gguf" not in sys.modules:
        found = getattr(_gguf_constants_alone(), "GGMLQuantizationType", None)
        if found is not None:
            return found
    from gguf import GGMLQuantizationType

    return GGMLQuantizationType


def _gguf_constants_alone() -> Any | None:
    """gguf/constants.py run as a module of its own (the package's __init__ not run), or None where it is not there
    or does not load alone."""
    import importlib.util

    spec = importlib.util.find_spec("gguf")
    folders = list(spec.submodule_search_locations or []) if spec else []
    path = Path(folders[0]) / "constants.py" if folders else None
    standalone = (
        importlib.util.spec_from_file_location("_onboard_gguf_constants", path) if path and path.is_file() else None
    )
    if standalone is None or standalone.loader is None:
        return None
    module = importlib.util.module_from_spec(standalone)
    try:
        standalone.loader.exec_module(module)
    except Exception:  # noqa: BLE001 - a gguf whose constants need the package: the caller imports it
        return None
    return module


def library_path() -> Path | None:
    """libggml-base of the llama.cpp install, when there is one."""
    from onboard import venvs

    for candidate in sorted(venvs.llamacpp().glob("lib/python3*/site-packages/llama_cpp/lib/libggml-base.so")):
        return candidate
    return None


_lock = threading.Lock()


@cache
def _library() -> _Library | None:
    if os.environ.get(DISABLE_ENV, "1") == "0":
        return None
    path = library_path()
    if path is None:
        return None
    try:
        return _Library(path)
    except (OSError, AttributeError):  # not a loadable ggml, or one without the calls used here
        return None


def describe() -> str:
    """Which quantizer the llama.cpp formats use in this process (for the plan's record)."""
    with _lock:
        library = _library()
    if library is None:
        why = "disabled by ONBOARD_GGML_NATIVE=0" if os.environ.get(DISABLE_ENV) == "0" else "llama.cpp not installed"
        return f"torch port of ggml's reference quantizers ({why})"
    return f"llama.cpp's own quantizers ({library.path})"


def supports(type_name: str, block: int, bytes_per_block: float) -> bool:
    """The library is there and stores this type as our format table says."""
    with _lock:
        library = _library()
    return library is not None and library.type_id(type_name, block, bytes_per_block) is not None


def quantize(w: Any, type_name: str, block: int, bytes_per_block: float) -> Any | None:
    """dequantize(quantize(w)) by the engine's library (float32, w's shape), or None when it cannot be used."""
    import torch

    with _lock:
        library = _library()
    if library is None or w.shape[-1] % block or w.device.type != "cpu":  # the C code reads host memory
        return None
    type_id = library.type_id(type_name, block, bytes_per_block)
    if type_id is None:
        return None
    traits = library.lib.ggml_get_type_traits(type_id).contents
    n_per_row = w.shape[-1]
    source = w.detach().to(torch.float32).contiguous().reshape(-1, n_per_row)
    rows = source.shape[0]
    row_bytes = n_per_row // block * traits.type_size
    packed = torch.empty(rows * row_bytes, dtype=torch.uint8)
    out = torch.empty_like(source)
    to_float = _TO_FLOAT(traits.to_float)

    def run(first: int, last: int) -> None:
        count = last - first
        library.lib.ggml_quantize_chunk(
            type_id, source.data_ptr(), packed.data_ptr(), first * n_per_row, count, n_per_row, None
        )
        to_float(packed.data_ptr() + first * row_bytes, out.data_ptr() + first * n_per_row * 4, count * n_per_row)

    workers = max(1, min(torch.get_num_threads(), rows))
    bounds = [rows * i // workers for i in range(workers + 1)]
    spans = [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]
    if len(spans) == 1:
        run(*spans[0])
    else:  # the last span in this thread, the others in the pool
        pending = [_pool().submit(run, *span) for span in spans[:-1]]
        run(*spans[-1])
        for future in pending:
            future.result()
    return out.reshape(w.shape)


@cache
def _pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max(1, (os.cpu_count() or 2) - 1), thread_name_prefix="ggml-quantize")
