"""The language model's tensors as name templates: what architecture checks look at instead of every name."""

from __future__ import annotations

from onboard.inspect_checkpoint import tensor_names as tn
from onboard.inspect_checkpoint.checkpoint_types import TensorInfo
from onboard.inspect_checkpoint.tensor_index import TensorIndex
from onboard.names.tensors import LAYER_TEMPLATE


def language_view(index: TensorIndex) -> dict[str, TensorInfo]:
    """Language-model templates (towers dropped, wrapper prefixes removed) -> the first tensor of each group."""
    out: dict[str, TensorInfo] = {}
    for g in index.groups:
        if tn.tower_of(g.template) is None:
            key = tn.strip_lm_prefix(g.template)
            out.setdefault(key, TensorInfo(g.first_name, g.dtype, g.first_shape, (0, g.nbytes), g.first_file))
    return out


def in_layer(template: str) -> bool:
    return LAYER_TEMPLATE.search(template) is not None


def shape_of(lm: dict[str, TensorInfo] | None, *needles: str) -> tuple[int, ...] | None:
    if not lm:
        return None
    for name, t in lm.items():
        if all(n in name for n in needles):
            return t.shape
    return None
