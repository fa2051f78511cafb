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

# Persistent buffers that checkpoints store but that are not parameters (transformers registers them as buffers):
# counted as component `buffers`, outside the total, so the total equals `model.num_parameters()`.
BUFFER_SUFFIXES = ("e_score_correction_bias",)

# Stored element → logical parameters for packed formats.
_PACKED_SUFFIXES = ("_blocks",)


_NOT_PARAMETERS = ("quant_scales", "buffers")


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
            comp = "buffers" if tmpl.endswith(BUFFER_SUFFIXES) else tn.component_of_template(tmpl)
            component_cache[tmpl] = comp
        n = logical_numel(t)
        by_component[comp] += n
        if comp not in _NOT_PARAMETERS:
            by_dtype[t.dtype] += n
    total = sum(n for c, n in by_component.items() if c not in _NOT_PARAMETERS)
    active = total
    if moe is not None and moe.num_experts > 0:
        # Only top_k of the routed experts run for a token; shared experts always run.
        routed = by_component.get("experts", 0)
        active = total - routed + routed * moe.top_k // moe.num_experts
    return ParameterCounts(
        total=total, active=active, by_dtype=dict(sorted(by_dtype.items())), by_component=dict(sorted(by_component.items()))
    )
