"""llama.cpp's quantizer (`llama_model_quantize`) through llama-cpp-python's bindings, with per-tensor type overrides
(`tt_overrides`, what `llama-quantize --tensor-type PATTERN=TYPE` fills). Standalone, run by .venv-llamacpp's python.
Usage: python llamacpp_quantize.py SPEC.json, SPEC = {input, output, ftype, tensor_types: [[pattern, type], ...],
token_embedding_type, output_tensor_type}; ftype and types are ggml names (q8_0, q4_K, f16, ...).
"""

from __future__ import annotations

import ctypes
import json
import sys


def ggml_type(name: str) -> int:
    from gguf import GGMLQuantizationType  # llama-cpp-python does not export ggml's enum; gguf-py mirrors it

    return int(GGMLQuantizationType[name.upper()])


def llama_ftype(name: str) -> int:
    import llama_cpp

    key = f"LLAMA_FTYPE_MOSTLY_{name.upper()}"
    if not hasattr(llama_cpp, key):
        raise SystemExit(f"llama.cpp has no file type {name!r} ({key})")
    return int(getattr(llama_cpp, key))


def quantize(spec: dict) -> None:
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_ftype(spec["ftype"])
    if spec.get("token_embedding_type"):
        params.token_embedding_type = ggml_type(spec["token_embedding_type"])
    if spec.get("output_tensor_type"):
        params.output_tensor_type = ggml_type(spec["output_tensor_type"])
    overrides = spec.get("tensor_types") or []
    array = (llama_cpp.llama_model_tensor_override * (len(overrides) + 1))()
    keep = [pattern.encode() for pattern, _ in overrides]  # the C strings must outlive the call
    for slot, (pattern, type_name) in zip(array, overrides):
        slot.pattern = pattern.encode()
        slot.type = ggml_type(type_name)
    array[len(overrides)].pattern = None
    if overrides:
        params.tt_overrides = ctypes.cast(array, type(params.tt_overrides))
    code = llama_cpp.llama_model_quantize(spec["input"].encode(), spec["output"].encode(), ctypes.byref(params))
    del keep
    if code != 0:
        raise SystemExit(f"llama_model_quantize returned {code}")


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as handle:
        quantize(json.load(handle))
