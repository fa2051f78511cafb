"""Routed experts beside the dense MLP in one feed-forward slot (Gemma 4 26B-A4B's `enable_moe_block`): the layer
stores its dense MLP, `router.{proj,scale,per_expert_scale}`, `experts.{gate_up_proj,down_proj}` and three more norms
at its own level; composition wraps the dense MLP's expression in extra_blocks.DenseBesideMoE.
"""

from __future__ import annotations

from onboard.generate_adapter.compose_rules import ComposerState, refusal
from onboard.generate_adapter.weight_inference import layer_target

# checkpoint part (under the layer) -> the block's parameter
PARTS = {
    "router.proj.weight": "router.weight",
    "router.scale": "router_scale",
    "router.per_expert_scale": "per_expert_scale",
    "experts.gate_up_proj": "experts_gate_up",
    "experts.down_proj": "experts_down",
    "post_feedforward_layernorm_1.weight": "post_dense_norm.weight",
    "pre_feedforward_layernorm_2.weight": "pre_moe_norm.weight",
    "post_feedforward_layernorm_2.weight": "post_moe_norm.weight",
}
KEYS = {"moe_intermediate_size": ("int", None), "num_experts": ("int", None), "top_k_experts": ("int", None)}


def moe_beside(c: ComposerState, dense: str) -> str | None:
    """The feed-forward expression with experts beside `dense` (a GatedMLP expression), or None when the
    checkpoint has none. A part or key missing is a stub."""
    found = {f.part: f for f in c.roles.parts("moe_beside")}
    if not found:
        if c.has_key("enable_moe_block"):  # read, and refused when true: no experts to load
            flag = c.fields.need("enable_moe_block", "bool", "False")
            c.post_init.append(
                refusal(
                    c.p.model_type,
                    "enable_moe_block",
                    flag.replace("args.", "self."),
                    "experts beside the dense MLP, but the checkpoint stores none",
                )
            )
        return None
    missing = sorted(set(PARTS) - found.keys()) + sorted(k for k in KEYS if not c.has_key(k))
    if missing or not dense.startswith("GatedMLP(") or not c.has_key("enable_moe_block"):
        c.stub(
            "moe_beside_mlp",
            "experts beside the dense MLP (Gemma 4) need a gated dense MLP, enable_moe_block "
            f"and every part: missing {', '.join(missing) or 'a gated dense MLP or enable_moe_block'}",
        )
        return None
    args = [a for a in dense.removeprefix("GatedMLP(").removesuffix(")").split(", ") if a != "bias=False"]
    if len(args) != 3:  # hidden, intermediate, activation: biases or multipliers are not Gemma 4's
        c.stub("moe_beside_mlp", f"experts beside a dense MLP with options the block does not take: {dense}")
        return None
    for part, target in PARTS.items():
        c.wm.add(layer_target(f"mlp.{target}"), (found[part].source,))
    size, experts, top_k = (c.fields.need(k, *spec) for k, spec in KEYS.items())
    enabled = c.fields.need("enable_moe_block", "bool", "False")
    # The tensors show the experts: a config.json saying otherwise is refused, not half-loaded
    c.post_init.append(
        refusal(
            c.p.model_type,
            "enable_moe_block",
            f"not {enabled}".replace("args.", "self."),
            "the checkpoint stores experts beside the dense MLP",
        )
    )
    c.words.append("routed experts beside the dense MLP")
    hidden, inter, act = args
    norms = ", ".join(["norm(args, args.hidden_size)"] * 3)
    return f"DenseBesideMoE({hidden}, {inter}, {size}, {experts}, {top_k}, {act}, ({norms}), {c.eps()})"
