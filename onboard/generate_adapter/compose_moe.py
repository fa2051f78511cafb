"""The MoE part of a composition: router, experts (per expert or stacked), shared experts and their gate, as one
`MoE(...)` expression plus the weight rules that fill it; and Gemma 4's routed experts beside the dense MLP
(`enable_moe_block`: extra_blocks.DenseBesideMoE)."""

from __future__ import annotations

from onboard.generate_adapter.compose_rules import ComposerState, refusal
from onboard.generate_adapter.weight_inference import Found, layer_target, template_pattern, templates

MOE = "mlp."


def moe_expression(c: ComposerState) -> str:
    r, p, f = c.roles, c.p, c.fields
    hidden, moe = p.dims.hidden_size, p.moe
    router = r.get("moe.router")
    if moe is None or router is None:
        c.stub("moe_router", "MoE layers without a recognised router tensor")
        return "MoE(args.hidden_size, args.num_experts, args.intermediate_size, RouterSpec(top_k=1))"
    if c.fact("moe_experts") == "gpt_oss":
        return _gpt_oss(c, router)
    biased = [x for x in (r.get("moe.router_linear_bias", "bias"), *r.parts("moe.experts.bias")) if x]
    if biased:
        c.stub("moe_biases", f"biases on the router or the experts are not in the MoE block: {templates(*biased)}")
    c.wm.add(layer_target(MOE + "router.weight"), (router.source,))
    inter, gated = _experts(c, hidden)
    known_moe_size = moe.expert_intermediate_size if c.has_key("moe_intermediate_size") else None
    size = c.size(
        inter or 0,
        [("args.moe_intermediate_size", known_moe_size), ("args.intermediate_size", p.dims.intermediate_size)],
    )
    if size == "args.moe_intermediate_size":
        f.need("moe_intermediate_size", "int", None)
    bias = r.get("moe.router_bias", None)
    if bias is not None:  # [E], or [1, E] (ERNIE MoE's moe_statics)
        op = "squeeze" if len(bias.shape) > 1 and bias.shape[0] == 1 else "copy"
        c.wm.add(layer_target(MOE + "e_score_correction_bias"), (bias.source,), op)
    spec = [f"top_k={f.need('num_experts_per_tok', 'int', None)}"]
    fixed = None if c.has_key("norm_topk_prob") else c.fact("norm_topk_prob")  # the code's choice, no key for it
    norm = repr(fixed) if fixed is not None else f.need("norm_topk_prob", "bool", "True")
    if c.has_key("expert_selection_fn"):  # Cohere2-MoE: softmax over the chosen logits (renormalised), or sigmoid
        selection = f.need("expert_selection_fn", "str", '"softmax"')
        spec.append(f"scoring={selection}")
        norm = f'{selection} == "softmax" or {norm}'
    elif moe.scoring != "softmax":
        spec.append(f'scoring="{moe.scoring}"')
    spec.append(f"norm_topk_prob={norm}")
    if c.has_key("routed_scaling_factor") or moe.routed_scaling_factor not in (None, 1.0):
        spec.append(f"routed_scaling_factor={f.need('routed_scaling_factor', 'float', '1.0')}")
    if bias is not None:
        spec.append("correction_bias=True")
    if c.has_key("moe_router_logit_softcapping"):  # Laguna: tanh soft-cap on the router logits (0: none)
        spec.append(f"logit_softcap={f.need('moe_router_logit_softcapping', 'float', '0.0')}")
    if c.has_key("moe_norm_min"):
        spec.append(f"norm_min={f.need('moe_norm_min', 'float', '0.0')}")
    if c.fact("router_select_by") == "logits":
        spec.append('select_by="logits"')
        c.words.append("experts ranked by router logits + bias")
    if (moe.n_group or 1) > 1 or c.has_key("n_group"):
        n_group, topk_group = f.need("n_group", "int", "1"), f.need("topk_group", "int", "1")
        if "topk_method" in p.config_keys and not c.ignores(
            "topk_method"
        ):  # DeepSeek-V2: greedy ignores the groups, group_limited_greedy ranks by max
            f.need("topk_method", "str | None", "None")
            n_group = f'1 if args.topk_method == "greedy" else {n_group}'
            spec.append('group_score="max" if args.topk_method == "group_limited_greedy" else "top2_sum"')
        spec.append(f"n_group={n_group}, topk_group={topk_group}")
    if (moe.scoring == "sigmoid" or bias is not None) and not c.fact("moe_weights_on_input"):
        spec.append("logits_in_float32=True")  # DeepSeek-style routers score float32 logits in transformers
    shared = _shared(c, hidden, inter, gated)
    on_input = ""
    if c.fact("moe_weights_on_input"):  # Llama 4: a Linear router in the activations' dtype, weights on the input
        on_input = ", weights_on_input=True"
        c.words.append("routing weights applied to each expert's input")
    if c.fact("moe_router") == "sparsemixer":
        return _sparsemixer(c, size, spec, shared)
    c.words.append(
        f"{moe.scoring} top-k MoE"
        + ("" if gated else " of plain experts (up, act, down)")
        + (" with shared experts" if shared else "")
    )
    return (
        f"MoE(args.hidden_size, {f.need('num_experts', 'int', None)}, {size}, RouterSpec({', '.join(spec)}), "
        f"activation=args.hidden_act{shared}{_output_norm(c)}{'' if gated else ', gated=False'}{on_input})"
    )


def _output_norm(c: ComposerState) -> str:
    """`, output_norm_eps=...` when the post-MLP norm of a pre-norm layer is on exactly the MoE layers, so it
    normalises the MoE output ('' otherwise). Where dense layers store one too, only the family's code says whether
    they apply it (A.X-K1's do not: family fact `moe_output_norm`, their copies dropped)."""
    r, p = c.roles, c.p
    post = r.get("norm.post_mlp")
    positions = {role for role in r.roles() if role.startswith("norm.")}
    if post is None or positions != {"norm.input", "norm.post_attention", "norm.post_mlp"} or p.norms.kind != "rms":
        return ""
    moe_layers = sum(1 for layer in p.layers if layer.mlp == "moe")
    if c.fact("moe_output_norm"):
        c.roles.dropped.append(template_pattern(post.template))  # the dense layers' copies
    elif post.count != moe_layers:
        return ""  # on dense layers too: a placement of its own (compose_norms says what is missing)
    c.moe_output_norm = True
    c.wm.add(layer_target(MOE + "output_norm.weight"), (post.source,))
    c.words.append("RMSNorm on the MoE output")
    return f", output_norm_eps={c.eps()}"


def _experts(c: ComposerState, hidden: int) -> tuple[int | None, bool]:
    """Fill experts_gate_up [E, 2I, H] (plain experts: experts_up [E, I, H]) and experts_down [E, H, I]; returns
    (I, whether the experts are gated)."""
    r = c.roles
    gate, up, down = r.get("moe.expert.gate"), r.get("moe.expert.up"), r.get("moe.expert.down")
    fused, fused_down = r.get("moe.experts.gate_up"), r.get("moe.experts.down")
    if gate and up and down:
        c.wm.add(layer_target(MOE + "experts_gate_up"), (gate.source, up.source), "stack")
        c.wm.add(layer_target(MOE + "experts_down"), (down.source,), "stack")
        return gate.shape[0], True
    if up and down and not (gate or fused):  # Nemotron-H: down(act(up(x))) per expert
        c.wm.add(layer_target(MOE + "experts_up"), (up.source,), "stack")
        c.wm.add(layer_target(MOE + "experts_down"), (down.source,), "stack")
        return up.shape[0], False
    if fused and fused_down and len(fused.shape) == 3:
        inner = [n for n in fused.shape[1:] if n != hidden]
        two_i = inner[0] if inner else hidden
        c.wm.expert_stack(layer_target(MOE + "experts_gate_up"), fused, two_i, hidden)
        c.wm.expert_stack(layer_target(MOE + "experts_down"), fused_down, hidden, two_i // 2)
        return two_i // 2, True
    rows = [r.get("moe.experts_rows", None, part) for part in ("w1", "v1", "w2")]
    experts = c.p.moe.num_experts if c.p.moe else None
    if all(rows) and experts and rows[0].shape[0] % experts == 0:  # type: ignore[union-attr]
        w1, v1, w2 = rows  # DBRX: [E x I, H] each; w2 holds each expert's down projection transposed ([I, H])
        c.wm.add(layer_target(MOE + "experts_gate_up"), (w1.source, v1.source), "expert_rows")  # type: ignore[union-attr]
        c.wm.add(layer_target(MOE + "experts_down"), (w2.source,), "expert_rows_transposed")  # type: ignore[union-attr]
        return rows[0].shape[0] // experts, True  # type: ignore[union-attr]
    found = [x.template for x in (gate, up, down, fused, fused_down, *rows) if x]
    c.stub("moe_experts", f"expert tensors not in a layout the MoE block reads: {', '.join(found) or 'none'}")
    return None, True


def _shared(c: ComposerState, hidden: int, expert_inter: int | None, gated: bool) -> str:
    """`, shared_intermediate_size=..., shared_gate=True` for the MoE expression ('' without shared experts)."""
    r, p, f = c.roles, c.p, c.fields
    gate, up, down = r.get("moe.shared.gate"), r.get("moe.shared.up"), r.get("moe.shared.down")
    fused = r.get("moe.shared.gate_up")
    if not (gate or up or down or fused):
        return ""
    target = layer_target(MOE + "shared.gate_up_proj.weight")
    if fused and down:
        c.wm.add(target, (fused.source,))
        inter = fused.shape[0] // 2
    elif gate and up and down:
        c.wm.add(target, (gate.source, up.source), "cat")
        inter = gate.shape[0]
    elif up and down and not gated:  # plain shared experts beside plain experts (Nemotron-H)
        c.wm.add(layer_target(MOE + "shared.up_proj.weight"), (up.source,))
        inter = up.shape[0]
    else:
        c.stub(
            "shared_experts",
            "shared expert tensors not in a gated layout: "
            + ", ".join(x.template for x in (gate, up, down, fused) if x),
        )
        return ""
    c.wm.add(layer_target(MOE + "shared.down_proj.weight"), (down.source,))  # type: ignore[union-attr]
    moe = p.moe
    candidates: list[tuple[str, int | None]] = []
    if c.has_key("shared_expert_intermediate_size"):
        candidates.append(("args.shared_expert_intermediate_size", moe.shared_expert_intermediate_size))  # type: ignore[union-attr]
        if c.has_key("num_shared_experts") and moe.shared_expert_intermediate_size:  # type: ignore[union-attr]
            candidates.append(
                (
                    "args.shared_expert_intermediate_size * args.num_shared_experts",  # dots.llm3
                    moe.shared_expert_intermediate_size * (moe.num_shared_experts or 1),
                )
            )  # type: ignore[union-attr]
    if c.has_key("num_shared_experts") and expert_inter:
        moe_size = "args.moe_intermediate_size" if c.has_key("moe_intermediate_size") else "args.intermediate_size"
        candidates.append((f"{moe_size} * args.num_shared_experts", expert_inter * moe.num_shared_experts))  # type: ignore[union-attr]
    candidates.append(("args.intermediate_size", p.dims.intermediate_size))
    size = c.size(inter, candidates)
    for name in ("shared_expert_intermediate_size", "num_shared_experts", "moe_intermediate_size"):
        if f"args.{name}" in size:
            f.need(name, "int", None)
    out = f", shared_intermediate_size={size}"
    shared_gate = r.get("moe.shared_gate")
    if shared_gate is not None:
        c.wm.add(layer_target(MOE + "shared_gate.weight"), (shared_gate.source,))
        out += ", shared_gate=True"
    if c.has_key("shared_expert_combination_strategy"):  # Cohere2-MoE: "average" halves routed + shared
        strategy = f.need("shared_expert_combination_strategy", "str", '"sum"')
        out += f', shared_average={strategy} == "average"'
    return out


def _sparsemixer(c: ComposerState, size: str, spec: list[str], shared: str) -> str:
    """PhiMoE's sparsemixer top-2 routing (extra_blocks.SparseMixerMoE), refused at load for another top-k."""
    if shared or len(spec) > 2 or c.roles.get("moe.router_bias", None) is not None:
        c.stub(
            "sparsemixer_routing",
            "sparsemixer routing with shared experts, a correction bias or router "
            f"options ({', '.join(spec)}) is not in the block library",
        )
    f = c.fields
    top_k, jitter = f.need("num_experts_per_tok", "int", None), f.need("router_jitter_noise", "float", "0.01")
    c.post_init.append(
        f"if {top_k.replace('args.', 'self.')} != 2:\n"
        "    raise ConfigError(\n"
        '        f"sparsemixer routing is top-2 only, not num_experts_per_tok={self.num_experts_per_tok}",\n'
        '        "use top-2 or add the routing",\n'
        "    )"
    )
    c.words.append("sparsemixer top-2 MoE")
    return (
        f"SparseMixerMoE(args.hidden_size, {f.need('num_experts', 'int', None)}, {size}, {jitter}, "
        "activation=args.hidden_act)"
    )


def _gpt_oss(c: ComposerState, router: Found) -> str:
    """gpt-oss's experts (extra_blocks.GptOssMoE; a family fact: the layout and activation are its code's)."""
    r, f = c.roles, c.fields
    gate_up, down = r.get("moe.experts.gate_up"), r.get("moe.experts.down")
    parts = {x.part for x in r.parts("moe.experts.bias")}
    stacked = gate_up is not None and down is not None and len(gate_up.shape) == 3
    if not stacked or parts != {"gate_up_proj", "down_proj"} or r.get("moe.router_linear_bias", "bias") is None:
        c.stub(
            "moe_experts",
            "gpt-oss experts need gate_up_proj / down_proj with their biases and a biased router: "
            f"{templates(gate_up, down, router)}",
        )
        return "GptOssMoE(args.hidden_size, 1, 1, 1, 1.0, 1.0)"
    names = [
        (router, "router.weight"),
        (r.get("moe.router_linear_bias", "bias"), "router.bias"),
        (gate_up, "experts.gate_up_proj"),
        (down, "experts.down_proj"),
    ]
    names += [(x, f"experts.{x.part}_bias") for x in r.parts("moe.experts.bias")]
    for found, name in names:
        c.wm.add(layer_target(MOE + name), (found.source,))  # type: ignore[union-attr]
    size = c.size(gate_up.shape[2] // 2, [("args.intermediate_size", c.p.dims.intermediate_size)])  # type: ignore[union-attr]
    c.words.append("gpt-oss MoE (clamped SwiGLU experts with biases, biased router)")
    return (
        f"GptOssMoE(args.hidden_size, {f.need('num_experts', 'int', None)}, {size}, "
        f"{f.need('num_experts_per_tok', 'int', None)}, {f.need('swiglu_alpha', 'float', '1.702')}, "
        f"{f.need('swiglu_limit', 'float', '7.0')})"
    )


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
