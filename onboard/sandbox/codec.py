"""What crosses the sandbox boundary: JSON, with each torch tensor (anywhere inside dicts and lists) replaced by
`{"__onboard_tensor__": "t0"}` and stored as entry `t0` of one safetensors file beside it. No pickles, no objects;
torch is imported only when a value holds tensors.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

TENSOR_KEY = "__onboard_tensor__"


def encode(value: Any, tensor_file: Path, what: str = "result") -> Any:
    """`value` as plain JSON data, its tensors written to `tensor_file` (if any). TypeError for anything else,
    named by its path inside `value`."""
    tensors: dict[str, Any] = {}
    data = _encode(value, tensors, what)
    if tensors:
        from safetensors.torch import save_file

        save_file(tensors, str(tensor_file))
    return data


def _encode(value: Any, tensors: dict[str, Any], where: str) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value  # inf/nan too: Python's json writes and reads them on both sides
    if isinstance(value, dict):
        if TENSOR_KEY in value:
            raise TypeError(f"{where}: the key {TENSOR_KEY!r} is reserved for tensors")
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{where}: dict keys must be strings, got {type(key).__name__} {key!r}")
            out[key] = _encode(item, tensors, f"{where}[{key!r}]")
        return out
    if isinstance(value, (list, tuple)):
        return [_encode(item, tensors, f"{where}[{i}]") for i, item in enumerate(value)]
    if type(value).__module__ == "torch" and type(value).__name__ in ("Tensor", "Parameter"):
        name = f"t{len(tensors)}"
        # clone: safetensors refuses views and tensors sharing storage
        tensors[name] = value.detach().to("cpu").contiguous().clone()
        return {TENSOR_KEY: name}
    raise TypeError(
        f"{where}: a {type(value).__module__}.{type(value).__name__} cannot cross the sandbox "
        "(only JSON data and torch tensors do)"
    )


def decode(data: Any, tensor_file: Path) -> Any:
    """The inverse of `encode`: tensor markers replaced by the tensors read from `tensor_file`."""
    if not _has_tensors(data):
        return data
    from safetensors.torch import load_file

    tensors = load_file(str(tensor_file))
    return _decode(data, tensors)


def _has_tensors(data: Any) -> bool:
    if isinstance(data, dict):
        return TENSOR_KEY in data or any(_has_tensors(v) for v in data.values())
    if isinstance(data, list):
        return any(_has_tensors(v) for v in data)
    return False


def _decode(data: Any, tensors: dict[str, Any]) -> Any:
    if isinstance(data, dict):
        if TENSOR_KEY in data:
            name = data[TENSOR_KEY]
            if name not in tensors:
                raise ValueError(f"tensor {name!r} is named in the result but missing from its safetensors file")
            return tensors[name]
        return {k: _decode(v, tensors) for k, v in data.items()}
    if isinstance(data, list):
        return [_decode(v, tensors) for v in data]
    return data
