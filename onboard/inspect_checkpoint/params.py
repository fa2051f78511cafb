"""Parameter counts from safetensors headers: total, per dtype, per component, active per token.

Counts are of stored elements, except packed 4-bit tensors (MXFP4 `*_blocks`, dtype U8 holding two values a byte),
which count the values they hold (TensorGroup.numel). Quantization scales are counted apart (component `quant_scales`) and not in the
total, so the total is the model's parameter count, as `model.num_parameters()` gives for an unquantized model.
"""

from __future__ import annotations

from collections import Counter

from onboard.inspect_checkpoint import tensor_names as tn
from onboard.inspect_checkpoint.tensor_index import TensorIndex
from onboard.profile import Moe, ParameterCounts

# Persistent buffers that checkpoints store but that are not parameters (transformers registers them as buffers):
# counted as component `buffers`, outside the total, so the total equals `model.num_parameters()`. Known families
# list their buffer templates in the catalog; this suffix list is the guess for families the catalog lacks.
GENERIC_BUFFER_SUFFIXES = ("e_score_correction_bias",)
# Leaf names one buffer goes by in different checkpoint formats (the original release vs transformers' own names).
_BUFFER_ALIASES = {"e_score_correction_bias": ("expert_bias", "router_bias")}  # router_bias: Ergo's original name

_NOT_PARAMETERS = ("quant_scales", "buffers")


def count_parameters(index: TensorIndex, moe: Moe | None, buffer_leaves: tuple[str, ...] | None) -> ParameterCounts:
    """Counts per dtype and component, from tensor groups (see tensor_index.py).

    `buffer_leaves`: what the family registers as buffers (from the catalog), None if unknown: leaf names, and
    full templates (with a dot) for buffers whose checkpoint name differs from the model's.
    """
    by_dtype: Counter[str] = Counter()
    by_component: Counter[str] = Counter()
    leaves = set(GENERIC_BUFFER_SUFFIXES if buffer_leaves is None else buffer_leaves)
    for leaf in list(leaves):
        leaves.update(_BUFFER_ALIASES.get(leaf, ()))
    templates = {leaf for leaf in leaves if "." in leaf}
    for g in index.groups:
        is_buffer = g.template.rpartition(".")[2] in leaves or g.template in templates
        comp = "buffers" if is_buffer else tn.component_of_template(g.template)
        n = g.numel
        by_component[comp] += n
        if comp not in _NOT_PARAMETERS:
            by_dtype[g.dtype] += n
    total = sum(n for c, n in by_component.items() if c not in _NOT_PARAMETERS)
    active = total
    if moe is not None and moe.num_experts > 0:
        # Only top_k of the routed experts run for a token; shared experts always run.
        routed = by_component.get("experts", 0)
        active = total - routed + routed * moe.top_k // moe.num_experts
    return ParameterCounts(
        total=total,
        active=active,
        by_dtype=dict(sorted(by_dtype.items())),
        by_component=dict(sorted(by_component.items())),
    )
