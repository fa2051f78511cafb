"""Per-layer facts read from tensor names: which mixer each layer has, MoE or dense MLP, K/V widths."""

from __future__ import annotations

import re
from collections import defaultdict

from msgspec.structs import replace

from onboard.inspect_checkpoint import tensor_names as tn
from onboard.inspect_checkpoint.tensor_index import TensorIndex
from onboard.names.tensors import LAYER_INDEX
from onboard.profile import LayerInfo

_K_PROJ = re.compile(r"\.(k_proj|key|Wk|k)\.weight$")
_V_PROJ = re.compile(r"\.(v_proj|value|Wv|v)\.weight$")
# MLA's down-projection to the cached latent: rows = kv_lora_rank + qk_rope_head_dim, one per attention module.
_MLA_LATENT = re.compile(r"\.kv_a_proj_with_mqa\.weight$")


def with_kv_widths(layers: tuple[LayerInfo, ...], index: TensorIndex) -> tuple[LayerInfo, ...]:
    """Per-layer K+V widths from the k/v projections' rows; for MLA layers the latent width, summed over the layer's
    attention modules (LongCat-Flash has two)."""
    attention_groups = [
        g
        for g in index.groups
        if tn.tower_of(g.template) is None
        and tn.in_layer(g.template)
        and tn.layer_role(tn.strip_lm_prefix(g.template)) == "attention"
        and (_K_PROJ.search(g.template) or _V_PROJ.search(g.template))
    ]
    k_rows: dict[int, int] = {}
    v_rows: dict[int, int] = {}
    for name, shape in index.shapes_of(attention_groups):
        idx = tn.layer_index(name)
        if idx is None or len(shape) != 2 or "indexer" in name:
            continue
        (k_rows if _K_PROJ.search(name) else v_rows)[idx] = shape[0]
    latent: dict[int, int] = defaultdict(int)
    mla_groups = [g for g in index.groups if tn.tower_of(g.template) is None and _MLA_LATENT.search(g.template)]
    for name, shape in index.shapes_of(mla_groups):
        idx = tn.layer_index(name)
        if idx is not None and len(shape) == 2:
            latent[idx] += shape[0]
    out = []
    for layer in layers:
        width = None
        if layer.attention == "mla" and layer.index in latent:
            width = latent[layer.index]
        elif layer.attention in ("full", "sliding", "chunked") and layer.index in k_rows:
            # No v projection: values are the keys (Gemma 4 global layers), cached twice by the engines.
            width = k_rows[layer.index] + v_rows.get(layer.index, k_rows[layer.index])
        out.append(replace(layer, kv_width=width) if width else layer)
    return tuple(out)


def with_norm_names(layers: tuple[LayerInfo, ...], index: TensorIndex) -> tuple[LayerInfo, ...]:
    """Each layer's stored norms (module names), recorded only when the layers differ in them."""
    norm_groups = [
        g
        for g in index.groups
        if tn.tower_of(g.template) is None
        and tn.in_layer(tn.strip_lm_prefix(g.template))
        and tn.component_of_template(tn.strip_lm_prefix(g.template)) == "norms"
    ]
    stored: dict[int, set[str]] = defaultdict(set)
    for name in index.names_of(norm_groups):
        short = tn.strip_lm_prefix(name)
        layer = LAYER_INDEX.search(short)  # everything up to the layer's own modules (`model.layers.3.`) cut off
        module = short[layer.end() :].rsplit(".", 1)[0] if layer else short  # "input_layernorm", "self_attn.q_norm"
        idx = int(layer.group(1)) if layer else None
        if idx is not None and "." not in module:  # the layer's own norms, not a mixer's inner ones
            stored[idx].add(module)
    per_layer = [tuple(sorted(stored.get(layer.index, ()))) for layer in layers]
    if len(set(per_layer)) <= 1:
        return layers
    return tuple(replace(layer, norms=norms) for layer, norms in zip(layers, per_layer, strict=True))


def per_layer_tensors(index: TensorIndex, n: int) -> tuple[dict[int, set[str]], dict[int, bool]]:
    """Mixer roles and MoE-ness per decoder layer, from the per-layer groups (not the experts: a router marks a MoE
    layer)."""
    roles: dict[int, set[str]] = defaultdict(set)
    moe_layers: dict[int, bool] = {}
    for g in index.groups:
        tmpl = tn.strip_lm_prefix(g.template)
        if tn.tower_of(g.template) or not tn.in_layer(tmpl) or tn.component_of_template(tmpl) == "experts":
            continue
        role, comp = tn.layer_role(tmpl), tn.component_of_template(tmpl)
        if not role and comp not in ("mlp", "router", "shared_experts"):
            continue
        for idx in map(tn.layer_index, index.names_of([g])):
            if idx is None or idx >= n:
                continue
            if role:
                roles[idx].add(role)
            if comp in ("router", "shared_experts"):
                moe_layers[idx] = moe_layers.get(idx, False) or comp == "router"
            elif comp == "mlp":
                moe_layers.setdefault(idx, False)
    if not any(moe_layers.values()) and any(tn.component_of_template(g.template) == "experts" for g in index.groups):
        # Experts without a recognised router: fall back to the experts' own layer indices.
        experts = [g for g in index.groups if tn.component_of_template(g.template) == "experts"]
        for name in index.names_of(experts):
            idx = tn.layer_index(name)
            if idx is not None and idx < n:
                moe_layers[idx] = True
    for i in range(n):
        roles.setdefault(i, set())
    return dict(roles), moe_layers
