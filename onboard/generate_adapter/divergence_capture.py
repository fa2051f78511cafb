"""Capture for the first-divergence bisect: one forward of a model with hooks on the points that matter, each output
as [positions, channels], keyed by role ("layers.1.attention", "embedding", "logits"). Plain data in and out, so it
runs in the sandbox worker too. Points are found by role, not by family (LAYER_ROLES names the aliases); q/k after
rotary are no module's output, so the rotary modules' cos tables are captured instead, as evidence.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

# Module name (relative to its decoder layer; "" the layer itself) -> role. Other names are not points (projections
# join only through the weight map's fusions).
LAYER_ROLES: dict[str, str] = {
    "input_layernorm": "input_norm",
    "attention_layernorm": "input_norm",
    "ln_1": "input_norm",
    "self_attn.q_norm": "q_norm",
    "self_attn.k_norm": "k_norm",
    "self_attn": "attention",
    "attn": "attention",
    "self_attention": "attention",
    "post_attention_layernorm": "post_attention_norm",
    "post_self_attn_layernorm": "post_self_attn_norm",
    "pre_feedforward_layernorm": "pre_mlp_norm",
    "feedforward_layernorm": "pre_mlp_norm",
    "ln_2": "pre_mlp_norm",
    "mlp.gate": "router",
    "mlp.router": "router",
    "block_sparse_moe.gate": "router",
    "block_sparse_moe.router": "router",
    "mlp.experts": "experts",
    "block_sparse_moe.experts": "experts",
    "mlp.shared_expert": "shared_experts",
    "mlp.shared_experts": "shared_experts",
    "mlp.shared": "shared_experts",
    "mlp": "mlp",
    "block_sparse_moe": "mlp",
    "feed_forward": "mlp",
    "post_feedforward_layernorm": "post_mlp_norm",
    "post_mlp_layernorm": "post_mlp_norm",
    "": "layer_output",
}
# Last name component of a module outside the decoder layers -> role. The logits are the model's own output (after
# any scaling outside `lm_head`); the embedding is the first layer's input (after any embedding multiplier).
MODEL_ROLES: dict[str, str] = {
    "norm": "final_norm",
    "final_layernorm": "final_norm",
    "ln_f": "final_norm",
}
HEAD, EMBEDDING = "logits", "embedding"
_LAYER = re.compile(r"^(?:.*?\.)?(?:layers|h|blocks)\.(\d+)(?:\.(.+))?$")
# Capture entries with a "/" are evidence for the heuristics, not points: a norm's weight and each rotary cos table.
WEIGHT_SUFFIX, ROTARY = "/weight", "rotary/"


def point_of(name: str, extra: Sequence[str] = ()) -> tuple[int | None, str] | None:
    """(layer, role) of a module name, or None; `extra`: layer-relative names kept under their own name."""
    match = _LAYER.match(name)
    if match:
        rel = match.group(2) or ""
        role = LAYER_ROLES.get(rel) or (rel if rel in extra else None)
        return (int(match.group(1)), role) if role else None
    role = MODEL_ROLES.get(name.rsplit(".", 1)[-1])
    return (None, role) if role and name.count(".") <= 2 else None


def key_of(layer: int | None, role: str) -> str:
    return role if layer is None else f"layers.{layer}.{role}"


def _tensor(output: Any) -> torch.Tensor | None:
    """A module's main output: the tensor itself, the first of a tuple (attention, routers), or `.logits`."""
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, (tuple, list)) and output and isinstance(output[0], torch.Tensor):
        return output[0]
    logits = getattr(output, "logits", None)
    return logits if isinstance(logits, torch.Tensor) else None


def by_position(t: torch.Tensor, seq_len: int) -> torch.Tensor:
    """[positions, channels], whatever the layout ([B, S, H, D] or [B, H, S, D]): the position axis is the one of
    length S, the axis right after the batch first."""
    t = t.detach()
    dims = [d for d in range(t.dim()) if t.shape[d] == seq_len]
    if not dims:
        return t.reshape(1, -1).clone()
    axis = 1 if 1 in dims and t.dim() > 2 else dims[0]
    return t.movedim(axis, 0).reshape(seq_len, -1).clone()


def is_rotary(name: str) -> bool:
    """transformers' `model.rotary_emb` (and `rotary_emb_local`), our adapters' `rotary.<layer kind>`."""
    parts = name.split(".")
    return parts[-1].startswith("rotary_emb") or (len(parts) > 1 and parts[-2] == "rotary")


def capture(model: nn.Module, input_ids: torch.Tensor, extra: Sequence[str] = ()) -> dict[str, torch.Tensor]:
    """One forward of `model` on `input_ids` [1, S]: {point key: output as [S, channels]} in the order the points
    ran (each its first call), plus norm weights (key + WEIGHT_SUFFIX) and rotary cos tables (ROTARY...).
    A router the MoE block reads by weight never fires its hook: its logits are recomputed from the block's input."""
    seq_len = int(input_ids.shape[-1])
    points: dict[str, torch.Tensor | None] = {}
    block_inputs: dict[str, torch.Tensor] = {}
    found = {name: point_of(name, extra) if name else (None, HEAD) for name, _ in model.named_modules()}
    modules = {name: module for name, module in model.named_modules() if found[name]}
    routers = {name.rsplit(".", 1)[0]: name for name, p in found.items() if p and p[1] == "router" and "." in name}

    def record(key: str) -> Callable[..., None]:
        def hook(_module: nn.Module, _args: Any, output: Any) -> None:
            tensor = _tensor(output)
            if tensor is not None and points.get(key) is None:
                points[key] = by_position(tensor, seq_len)

        return hook

    def before(name: str) -> Callable[..., None]:
        def hook(_module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            x = args[0] if args else kwargs.get("hidden_states")
            x = x if isinstance(x, torch.Tensor) else None
            if found[name] == (0, "layer_output") and x is not None:
                points.setdefault(EMBEDDING, by_position(x, seq_len))
            if name in routers:
                points.setdefault(key_of(*found[routers[name]]), None)  # its place in the order
                if x is not None:
                    block_inputs.setdefault(name, x.detach())

        return hook

    def tables(name: str) -> Callable[..., None]:
        def hook(_module: nn.Module, _args: Any, output: Any) -> None:
            cos = _tensor(output)
            if cos is not None and cos.is_complex():  # Llama 4's freqs_cis, cos + i sin: its cosine table
                cos = cos.real
            if cos is not None:
                calls = sum(k.startswith(f"{ROTARY}{name}#") for k in points)
                points[f"{ROTARY}{name}#{calls}"] = by_position(cos.float(), seq_len)

        return hook

    handles = [m.register_forward_hook(tables(n)) for n, m in model.named_modules() if n and is_rotary(n)]
    for name, module in modules.items():
        key = key_of(*found[name])  # type: ignore[misc]
        if key.endswith("_norm") and isinstance(getattr(module, "weight", None), torch.Tensor):
            points[key + WEIGHT_SUFFIX] = module.weight.detach().float().clone()
        if found[name] == (0, "layer_output") or name in routers:
            handles.append(module.register_forward_pre_hook(before(name), with_kwargs=True))
        handles.append(module.register_forward_hook(record(key)))
    try:
        with torch.no_grad():
            model(input_ids=input_ids)
    finally:
        for handle in handles:
            handle.remove()
    for block, name in routers.items():
        router, key = modules[name], key_of(*found[name])  # type: ignore[misc]
        if points.get(key) is None and block in block_inputs and isinstance(router, nn.Linear):
            x = block_inputs[block].reshape(-1, router.in_features).float()
            bias = None if router.bias is None else router.bias.float()
            points[key] = torch.nn.functional.linear(x, router.weight.float(), bias)
    return {k: v for k, v in points.items() if v is not None}
