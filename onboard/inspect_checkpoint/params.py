"""Parameter counts from safetensors headers: total, per dtype, per component, active per token.

Counts are of stored elements, except packed 4-bit tensors (MXFP4 `*_blocks`, dtype U8 holding two values a byte),
which count the values they hold. Quantization scales are counted apart (component `quant_scales`) and not in the
total, so the total is the model's parameter count, as `model.num_parameters()` gives for an unquantized model.
"""

from __future__ import annotations

from collections import Counter

from onboard.inspect_checkpoint import tensor_names as tn
from onboard.inspect_checkpoint.checkpoint_types import TensorInfo
from onboard.profile import Moe, ParameterCounts

# Stored element → logical parameters for packed formats.
_PACKED_SUFFIXES = ("_blocks",)


def logical_numel(t: TensorInfo) -> int:
    if t.dtype == "U8" and t.name.endswith(_PACKED_SUFFIXES):
        return t.numel * 2
    return t.numel


def count_parameters(tensors: dict[str, TensorInfo], moe: Moe | None) -> ParameterCounts:
    by_dtype: Counter[str] = Counter()
    by_component: Counter[str] = Counter()
    component_cache: dict[str, str] = {}
    for name, t in tensors.items():
        tmpl = tn.template(name)
        comp = component_cache.get(tmpl)
        if comp is None:
            comp = component_cache[tmpl] = tn.component_of_template(tmpl)
        n = logical_numel(t)
        by_component[comp] += n
        if comp != "quant_scales":
            by_dtype[t.dtype] += n
    total = sum(n for c, n in by_component.items() if c != "quant_scales")
    active = total
    if moe is not None and moe.num_experts > 0:
        # Only top_k of the routed experts run for a token; shared experts always run.
        routed = by_component.get("experts", 0)
        active = total - routed + routed * moe.top_k // moe.num_experts
    return ParameterCounts(
        total=total, active=active, by_dtype=dict(sorted(by_dtype.items())), by_component=dict(sorted(by_component.items()))
    )
