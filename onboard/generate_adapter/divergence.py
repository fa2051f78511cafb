"""Where parity breaks: match a capture of the adapter with one of the reference (divergence_capture) point by
point, in the reference's execution order, and name the first layer and sub-module whose output differs beyond the
dtype's tolerance, with likely causes (divergence_causes). Fused projections (`qkv_proj`, `gate_up_proj`) are split
by the reference's widths, through the adapter's weight map's "cat" rules.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn

from onboard.comparator import threshold
from onboard.generate_adapter.divergence_capture import LAYER_ROLES, ROTARY, WEIGHT_SUFFIX, capture, key_of
from onboard.generate_adapter.divergence_causes import Evidence, likely_causes

POINT_RULE = "point_error"  # the comparator's THRESHOLDS row bounding one point's max|Δ| / max|ref|


def _layer_module(name: str) -> str | None:
    """`model.layers.{i}.X.weight` -> X (a module relative to its layer), else None."""
    prefix, suffix = "model.layers.{i}.", ".weight"
    return name[len(prefix) : -len(suffix)] if name.startswith(prefix) and name.endswith(suffix) else None


def fusions(weight_map: Sequence[Any]) -> dict[str, tuple[str, ...]]:
    """Fused module -> its parts, from a weight map's "cat" rules: `self_attn.qkv_proj` -> (`self_attn.q_proj`, ...)."""
    out = {}
    for rule in weight_map:
        target, parts = _layer_module(rule.target), [_layer_module(s) for s in rule.sources]
        if rule.op == "cat" and target and all(parts):
            out[target] = tuple(parts)  # type: ignore[arg-type]
    return out


def renamed_roles(weight_map: Sequence[Any]) -> dict[str, str]:
    """The adapter's point role -> the reference's, where a "copy" rule loads it from a module of another role
    (GLM-4's post_self_attn_layernorm loads the adapter's canonically named post_attention_layernorm)."""
    out = {}
    for rule in weight_map:
        target, source = _layer_module(rule.target), _layer_module(rule.sources[0])
        ours, theirs = LAYER_ROLES.get(target or ""), LAYER_ROLES.get(source or "")
        if rule.op == "copy" and ours and theirs and ours != theirs:
            out[ours] = theirs
    return out


def _as_reference(ours: Mapping[str, torch.Tensor], roles: Mapping[str, str]) -> dict[str, torch.Tensor]:
    """`ours` with each point (and its evidence) under the reference's role (`renamed_roles`)."""
    out = {}
    for key, value in ours.items():
        point, slash, evidence = key.partition("/")
        layer, role = _split_key(point)
        out[(key_of(layer, roles[role]) + slash + evidence) if layer is not None and role in roles else key] = value
    return out


def _unfuse(ours: dict[str, torch.Tensor], ref: Mapping[str, torch.Tensor], fused: Mapping[str, tuple[str, ...]]):
    """Split each fused output of ours into its parts, by the widths of the reference's parts (last dim)."""
    out = dict(ours)
    for key, tensor in ours.items():
        layer, rel = _split_key(key)
        parts = [key_of(layer, p) for p in fused.get(rel, ())] if layer is not None else []
        if not parts or not all(p in ref for p in parts) or any(p in ours for p in parts):
            continue
        widths = [ref[p].shape[-1] for p in parts]
        if sum(widths) == tensor.shape[-1]:
            out.update(zip(parts, tensor.split(widths, dim=-1)))
            del out[key]
    return out


def point_error(ours: torch.Tensor, ref: torch.Tensor) -> tuple[float, float, int]:
    """(max|Δ|, max|Δ| / max|ref|, non-finite count) in float64; a shape mismatch or a non-finite value is inf."""
    a, b = ours.detach().double().cpu(), ref.detach().double().cpu()
    bad = int((~torch.isfinite(a)).sum() + (~torch.isfinite(b)).sum())
    if a.numel() != b.numel() or bad:
        return math.inf, math.inf, bad
    diff = float((a.reshape(b.shape) - b).abs().max()) if b.numel() else 0.0
    return diff, diff / max(float(b.abs().max()) if b.numel() else 0.0, 1e-30), 0


def _split_key(key: str) -> tuple[int | None, str]:
    if key.startswith("layers."):
        _, layer, role = key.split(".", 2)
        return int(layer), role
    return None, key


def compare(
    ours: Mapping[str, torch.Tensor],
    ref: Mapping[str, torch.Tensor],
    dtype: str = "float32",
    noise: Mapping[str, torch.Tensor] | None = None,
    fused: Mapping[str, tuple[str, ...]] | None = None,
) -> dict[str, Any]:
    """Two captures of the same input -> {per_layer_error, first_divergence, only_in_reference, only_in_adapter}.
    `noise`: the reference captured in `dtype`, whose own error at each point sets that point's tolerance
    (comparator.threshold); without it, the point_error row's uncalibrated bound."""
    ours = _unfuse(dict(ours), ref, fused or {})
    floor = threshold(POINT_RULE, dtype)
    rows, first = [], None
    for key, expected in ref.items():
        if "/" in key or key not in ours:
            continue
        max_abs, rel, bad = point_error(ours[key], expected)
        tol = floor
        if noise is not None and key in noise:
            noise_rel = point_error(noise[key], expected)[1]
            tol = threshold(POINT_RULE, dtype, noise_rel) if math.isfinite(noise_rel) else floor
        layer, module = _split_key(key)
        row = {"layer": layer, "module": module, "max_abs": max_abs, "rel": rel, "tolerance": tol}
        row.update({"nonfinite": bad} if bad else {})
        rows.append(row)
        if first is None and (bad or not rel <= tol):  # non-finite values diverge whatever the reference's noise
            first = dict(row, key=key)
    missing = [k for k in ref if k not in ours and "/" not in k]
    extra = [k for k in ours if k not in ref and "/" not in k]
    if first is not None:
        key = first.pop("key")
        evidence = Evidence(
            ref.get(key + WEIGHT_SUFFIX),
            _missing_before(key, ref, missing),
            [v for k, v in ours.items() if k.startswith(ROTARY)],
            [v for k, v in ref.items() if k.startswith(ROTARY)],
        )
        first["likely_cause"] = likely_causes(ours[key], ref[key], first["tolerance"], evidence)
    return {
        "per_layer_error": [_json_row(r) for r in rows],
        "first_divergence": _json_row(first) if first else None,
        "only_in_reference": missing,
        "only_in_adapter": extra,
        "point_tolerance": floor,
    }


def _missing_before(key: str, ref: Mapping[str, Any], missing: Sequence[str]) -> list[str]:
    """Reference points of the same layer, run before `key`, that the adapter has no counterpart for."""
    layer = _split_key(key)[0]
    order = list(ref)
    return [_split_key(m)[1] for m in missing if _split_key(m)[0] == layer and order.index(m) < order.index(key)]


def _json_row(row: dict[str, Any]) -> dict[str, Any]:
    """Floats rounded to 4 significant digits; inf/NaN become null (the `nonfinite` count says why)."""
    return {k: (float(f"{v:.4g}") if math.isfinite(v) else None) if isinstance(v, float) else v for k, v in row.items()}


def locate(
    adapter: nn.Module,
    reference: nn.Module | Mapping[str, torch.Tensor],
    input_ids: torch.Tensor,
    dtype: str = "float32",
    noise: nn.Module | Mapping[str, torch.Tensor] | None = None,
) -> dict[str, Any]:
    """Capture the adapter and the reference (a model, or a capture made elsewhere with
    `extra=projection_names(adapter)`) on `input_ids` [1, S] and compare them."""
    weight_map = getattr(type(adapter), "WEIGHT_MAP", ())
    fused = fusions(weight_map)
    names = projection_names(adapter)
    ours = _as_reference(capture(adapter, input_ids, names), renamed_roles(weight_map))
    ref = reference if isinstance(reference, Mapping) else capture(reference, input_ids, names)
    calibration = noise if isinstance(noise, Mapping) or noise is None else capture(noise, input_ids, names)
    result = compare(ours, ref, dtype, calibration, fused)
    return result | {"input_length": int(input_ids.shape[-1])}


def projection_names(adapter: nn.Module | type) -> tuple[str, ...]:
    """Layer-relative names captured besides the roles: the adapter's fused projections and their parts."""
    fused = fusions(getattr(adapter if isinstance(adapter, type) else type(adapter), "WEIGHT_MAP", ()))
    return tuple(dict.fromkeys([*fused, *(p for parts in fused.values() for p in parts)]))


def summary(result: Mapping[str, Any]) -> str:
    """One line for a check's detail: where it first diverges and why, or that no point does."""
    first = result.get("first_divergence")
    if not first:
        return f"no point diverges beyond tolerance ({len(result.get('per_layer_error') or [])} points compared)"
    where = f"layer {first['layer']} {first['module']}" if first["layer"] is not None else first["module"]
    rel = "non-finite" if first["rel"] is None else f"rel {first['rel']:.3g} > {first['tolerance']:.1e}"
    causes = "; ".join(first.get("likely_cause") or []) or "no pattern recognised"
    return f"first divergence at {where} ({rel}): {causes}"
