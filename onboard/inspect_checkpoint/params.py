"""Parameter counts from safetensors headers: total, per dtype, per component, active per token. Packed 4-bit tensors
count the values they hold; quantization scales and buffers are counted apart, so the total is `num_parameters()`.
"""

from __future__ import annotations

from collections import Counter

from onboard.inspect_checkpoint import tensor_names as tn
from onboard.inspect_checkpoint.tensor_index import TensorIndex
from onboard.profile import Moe, ParameterCounts

# Buffers checkpoints store, for families the catalog lacks (known families list theirs in the catalog).
GENERIC_BUFFER_SUFFIXES = ("e_score_correction_bias",)
# Leaf names one buffer goes by in different checkpoint formats (the original release vs transformers' own names).
_BUFFER_ALIASES = {"e_score_correction_bias": ("expert_bias", "router_bias")}  # router_bias: Ergo's original name

_NOT_PARAMETERS = ("quant_scales", "buffers")


def count_parameters(index: TensorIndex, moe: Moe | None, buffer_leaves: tuple[str, ...] | None) -> ParameterCounts:
    """`buffer_leaves`: what the family registers as buffers (families.family_buffers), None if unknown."""
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
