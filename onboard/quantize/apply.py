"""Put formats on units of a loaded model for the length of a `with` block, then restore the original weights.

A format's dequantized weights are swapped in as the Parameter's data (nothing copied or cloned) and its activation
rounding added as a pre-hook on each module multiplying by a quantized 2-D weight. Embedding lookups and 3-D experts
are weight-only (`activations_simulated: false`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from onboard.quantize.formats import BF16, Format
from onboard.quantize.units import Tensor, Unit

CACHE_LIMIT_BYTES = 2 << 30
SOURCES_KEPT = 4  # a unit has at most three tensors (q, k, v)


class QuantizedWeights:
    """Dequantized weights per (tensor, format), computed once; kept while they fit CACHE_LIMIT_BYTES.

    Kept, not evicted: plans measured one after another apply every unit in turn, a cycle that would thrash a
    least-recently-used bound. A caller that will not reuse an entry drops it (the sweep keeps only each unit's
    probe): fresh memory is dearer than recomputing, while dropped memory is reused (forward.hold_freed_memory)."""

    def __init__(self, limit: int = CACHE_LIMIT_BYTES) -> None:
        self.limit, self.used = limit, 0
        self._cache: dict[tuple[str, str], Any] = {}
        self._original: dict[str, Any] = {}
        # The float32 [out, in] source of the last few tensors: the sweep quantizes a unit into every format in turn.
        self._sources: OrderedDict[str, Any] = OrderedDict()
        self._holders: dict[str, list[Any]] = {}

    def original(self, tensor: Tensor) -> Any:
        """The checkpoint's values: the Parameter's own data, held here while a format is swapped in."""
        if tensor.name not in self._original:
            self._original[tensor.name] = tensor.param.data
        return self._original[tensor.name]

    def has(self, tensor: Tensor, fmt: Format) -> bool:
        return (tensor.name, fmt.name) in self._cache

    def get(self, tensor: Tensor, fmt: Format) -> Any:
        key = (tensor.name, fmt.name)
        if key in self._cache:
            return self._cache[key]
        value = fmt.quantize(self._source(tensor))
        if tensor.transposed:
            value = value.transpose(-1, -2)
        value = value.to(tensor.param.dtype).contiguous()
        size = _nbytes(value)
        if self.used + size <= self.limit:
            self._cache[key] = value
            self.used += size
        return value

    def drop(self, unit: Unit, fmt: Format) -> None:
        """Forget the unit's weights in `fmt` (a no-op for what was not kept)."""
        for tensor in unit.tensors:
            value = self._cache.pop((tensor.name, fmt.name), None)
            if value is not None:
                self.used -= _nbytes(value)

    def _source(self, tensor: Tensor) -> Any:
        source = self._sources.pop(tensor.name, None)
        if source is None:
            source = self.original(tensor).float()
            source = (source.transpose(-1, -2) if tensor.transposed else source).contiguous()
        self._sources[tensor.name] = source
        while len(self._sources) > SOURCES_KEPT:
            self._sources.popitem(last=False)
        return source

    def holders(self, model: Any, tensor: Tensor) -> list[Any]:
        """activation_modules(model, tensor), found once."""
        if tensor.name not in self._holders:
            self._holders[tensor.name] = activation_modules(model, tensor)
        return self._holders[tensor.name]


def _nbytes(value: Any) -> int:
    return value.numel() * value.element_size()


def activation_modules(model: Any, tensor: Tensor) -> list[Any]:
    """Modules that multiply their input by `tensor` (every holder of the Parameter but embeddings)."""
    if tensor.param.ndim != 2:
        return []
    return [
        m for m in model.modules() if getattr(m, "weight", None) is tensor.param and "Embedding" not in type(m).__name__
    ]


Rounding = tuple[Any, int, Any]  # (input tensor, its version counter then, its rounding)


@contextmanager
def quantized(
    model: Any,
    assignment: Mapping[Unit, Format],
    weights: QuantizedWeights,
    roundings: dict[tuple[Any, int], Rounding] | None = None,
) -> Iterator[None]:
    """Within the block, every unit of `assignment` holds its format's weights (BF16: unchanged).

    `roundings`: kept by a caller whose blocks feed their matmuls the same input tensors (the sweep's energies): an
    input's rounding is reused by a later block with the same activation function (most candidates round as Q8_0 or
    Q8_K). Without it, nothing outlives the block."""
    import torch

    handles, touched = [], []
    last: dict[Any, Rounding] = {}  # the hooks' latest rounding per function (see _round_input)
    try:
        with torch.no_grad():
            for unit, fmt in assignment.items():
                if fmt.name == BF16:
                    continue
                for tensor in unit.tensors:
                    weights.original(tensor)
                    touched.append(tensor)
                    tensor.param.data = weights.get(tensor, fmt)
                    act = fmt.resolve(tensor.shape).activation
                    if act is not None:
                        handles += [
                            m.register_forward_pre_hook(_round_input(act, last, roundings))
                            for m in weights.holders(model, tensor)
                        ]
        yield
    finally:
        for handle in handles:
            handle.remove()
        for tensor in touched:
            tensor.param.data = weights.original(tensor)


def _round_input(act: Any, last: dict[Any, Rounding], kept: dict[tuple[Any, int], Rounding] | None = None) -> Any:
    """A pre-hook rounding a matmul's input with `act`. `last` (one per `quantized` block) holds the latest rounding
    per function: q, k and v read the same tensor, rounded once while its version counter shows it unchanged.
    `kept`: every rounding by function and input id, for later blocks (an entry holds its input, so the id stays
    its own)."""

    def hook(_module: Any, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
        if not args or not hasattr(args[0], "is_floating_point") or not args[0].is_floating_point():
            return None
        x = args[0]
        seen = last.get(act)
        if seen is None or seen[0] is not x or seen[1] != x._version:
            seen = kept.get((act, id(x))) if kept is not None else None
        if seen is not None and seen[0] is x and seen[1] == x._version:
            last[act] = seen
            return (seen[2], *args[1:])
        rounded = act(x.float()).to(x.dtype)
        last[act] = (x, x._version, rounded)
        if kept is not None:
            kept[(act, id(x))] = last[act]
        return (rounded, *args[1:])

    return hook


def activations_simulated(unit: Unit) -> bool:
    """Whether every matmul of the unit sees its input rounded (an embedding lookup has none to round)."""
    if unit.kind == "embedding":
        return unit.name == "embedding+head"
    return all(t.param.ndim == 2 for t in unit.tensors)
