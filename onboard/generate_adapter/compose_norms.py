"""The norms of a composition: the layer norms' placement and block, the final norm, QK-norm, and the norms some
blocks apply before their output projection."""

from __future__ import annotations

from onboard.generate_adapter.compose_mixers import LAYER_TYPE_NAMES
from onboard.generate_adapter.compose_rules import ComposerState, single_block_layers
from onboard.generate_adapter.weight_inference import layer_target, templates

# Canonical norm attribute per placement and norm position.
NORM_NAMES: dict[str, dict[str, str]] = {
    "pre": {"input": "input_layernorm", "pre_mlp": "post_attention_layernorm"},
    "parallel": {"input": "input_layernorm"},
    "parallel2": {"input": "input_layernorm", "pre_mlp": "post_attention_layernorm"},
    "sandwich": {"input": "input_layernorm", "post_attn_out": "post_attention_layernorm",
                 "pre_mlp": "pre_feedforward_layernorm", "post_mlp": "post_feedforward_layernorm"},
    "post": {"post_attn_out": "post_attention_layernorm", "post_mlp": "post_feedforward_layernorm"},
    # GPT-1 / OPT-350m: the norms stored where a pre-norm layer's are, applied to the residual sums
    "post_ln": {"input": "post_attention_layernorm", "pre_mlp": "post_feedforward_layernorm"},
    "single": {"input": "input_layernorm"},
    # pre-norm layers' input and post-attention norms, post-norm layers' post-attention and post-MLP norms
    "by_layer_type": {"input": "input_layernorm", "post_attn_out": "post_attention_layernorm",
                      "post_mlp": "post_feedforward_layernorm"},
}  # fmt: skip
PLACEMENTS: dict[frozenset[str], str] = {
    frozenset({"input", "pre_mlp"}): "pre",
    frozenset({"input"}): "parallel",
    frozenset({"input", "post_attn_out", "pre_mlp", "post_mlp"}): "sandwich",
    frozenset({"post_attn_out", "post_mlp"}): "post",
}


def norms(c: ComposerState) -> tuple[str, str, tuple[str, ...]]:
    r, p = c.roles, c.p
    positions = {role.removeprefix("norm."): role for role in sorted(r.roles()) if role.startswith("norm.")}
    if c.moe_output_norm:  # the MoE block's own (compose_moe._output_norm)
        del positions["post_mlp"]
    _resolve_post_attention(positions)
    weightless = c.fact("weightless_norms") if not positions and r.get("final_norm") is None else None
    placement = str(weightless) if weightless else PLACEMENTS.get(frozenset(positions))
    if p.norms.placement == "post_ln":
        placement = _post_ln(c, placement, positions)
    by_type = _by_layer_type(c) if placement is None else None
    if by_type is not None:
        placement = "by_layer_type"
    if placement == "pre" and "parallel_residual" in p.features:
        placement = "parallel2"
    if placement == "parallel" and single_block_layers(p):
        placement = "single"
    if placement == "parallel" and "parallel_residual" not in p.features:
        # One norm per layer feeding attention and an MLP: the one placement of the library that reads a single norm
        # (GPT-J, Phi-2, Cohere); config says nothing, so parity is what confirms it.
        c.words.append("attention and MLP in parallel (one norm per layer, no config flag: parity confirms)")
    if placement is None:
        c.stub(
            "norm_layout",
            f"layer norms at {sorted(positions) or 'no position (none stored)'}: not a "
            "placement of the block library (pre, post, post-LN, sandwich, parallel, or pre / post by layer "
            "type)",
        )
        placement = "pre"
    names = NORM_NAMES[placement]
    targets = by_type or {names[pos]: role for pos, role in positions.items() if pos in names}
    biases = [_load(c, role, layer_target(name)) for name, role in targets.items()]
    if r.get("embed_norm") is not None:  # the layers' norm on the embeddings (BLOOM's word_embeddings_layernorm)
        c.embed_norm = True
        _load(c, "embed_norm", "model.embed_norm")
        c.words.append("norm on the embeddings")
    final = r.get("final_norm")
    named_for_embeddings = r.get("embedding_norm")
    if named_for_embeddings is not None:
        if final is None and c.fact("embedding_norm_is_final"):  # LFM2: applied after the last layer
            final = named_for_embeddings
        else:
            c.stub(
                "embedding_norm",
                f"{named_for_embeddings.template}: a norm named for the embeddings, applied "
                "before the first layer or after the last? Only the family's code says (compose_knowledge)",
            )
    if weightless:  # every norm, the final one too, normalises without a weight: nothing to load
        c.words.append("norms without weights")
        c.embed_norm = bool(c.fact("embedding_norm"))
        return norm_block(c, False, weightless=True), placement, tuple(names[k] for k in names)
    if final is None and placement == "post_ln":  # the last layer's output is normalised already
        c.final_norm = False
        c.words.append("no final norm")
    elif final is None:
        c.stub("final_norm", "no final norm tensor before the LM head")
    else:
        biases.append(_load(c, final.role, "model.norm"))
    return norm_block(c, any(biases)), placement, tuple(names[k] for k in names)


def _post_ln(c: ComposerState, placement: str | None, positions: dict[str, str]) -> str | None:
    """The post_ln placement (norms on the residual sums: GPT-1, OPT-350m), read from a pre-norm layer's two norms."""
    if placement != "pre":
        c.stub(
            "norm_layout",
            f"norms on the residual sums (post-LN) stored at {sorted(positions)}: the post-LN "
            "placement reads two, where a pre-norm layer stores them",
        )
        return placement
    if c.has_key("do_layer_norm_before"):  # the adapter composed for post-norm layers refuses a pre-norm config
        why = "pre-norm layers: this adapter was composed for post-norm ones (OPT-350m)"
        c.guard_tests["do_layer_norm_before"] = ("self.do_layer_norm_before", why)
    c.words.append("post-LN layers (norm on the residual sums)")
    return "post_ln"


def _resolve_post_attention(positions: dict[str, str]) -> None:
    """`post_attention_layernorm` names a norm by context: on the attention output when the layer has a pre-MLP norm
    or, without an input norm, a post-MLP one; else before the MLP."""
    if "post_attention" in positions:
        after = "pre_mlp" in positions or ("input" not in positions and "post_mlp" in positions)
        positions["post_attn_out" if after else "pre_mlp"] = positions.pop("post_attention")


def _by_layer_type(c: ComposerState) -> dict[str, str] | None:
    """{runtime norm name: role} when some attention kinds' layers are pre-norm and the others post-norm (OLMo-hybrid),
    from each layer's norms (LayerInfo.norms); None otherwise. Sets c.norm_exprs for the norms one kind lacks."""
    layers = c.p.layers
    if not layers or not all(layer.norms for layer in layers):
        return None
    role_of = {}
    for role in c.roles.roles():
        found = c.roles.get(role) if role.startswith("norm.") else None
        if found is not None:
            role_of[found.template.split("{}.", 1)[-1].rsplit(".", 1)[0]] = role
    kinds: dict[str, set[tuple[str, ...]]] = {}
    for layer in layers:
        kinds.setdefault(layer.attention, set()).add(layer.norms)
    placement_of, targets = {}, {}
    for kind, stored in kinds.items():
        if len(stored) != 1 or not all(m in role_of for m in next(iter(stored))):
            return None  # layers of one kind differ, or a norm has no role: not a placement per kind
        positions = {role_of[m].removeprefix("norm."): role_of[m] for m in next(iter(stored))}
        _resolve_post_attention(positions)
        placement = PLACEMENTS.get(frozenset(positions))
        if placement not in ("pre", "post"):
            return None
        placement_of[kind] = placement
        for pos, role in positions.items():
            if targets.setdefault(NORM_NAMES[placement][pos], role) != role:
                return None  # one runtime norm read from two stored ones
    if set(placement_of.values()) != {"pre", "post"}:
        return None
    pre = sorted(LAYER_TYPE_NAMES.get(k, f"{k}_attention") for k, p in placement_of.items() if p == "pre")
    condition = "layer_type in (" + ", ".join(f'"{name}"' for name in pre) + ",)"
    c.norm_exprs = {
        "input_layernorm": f"norm(args, args.hidden_size) if {condition} else None",
        "post_feedforward_layernorm": f"None if {condition} else norm(args, args.hidden_size)",
    }
    c.words.append("pre-norm " + " / ".join(pre) + " layers, post-norm others")
    return targets


def _load(c: ComposerState, role: str, target: str) -> bool:
    """Rules filling `target`.weight and .bias from the role's tensors; whether it has a bias."""
    for param in ("weight", "bias"):
        found = c.roles.get(role, param)
        if found is not None:
            c.wm.add(f"{target}.{param}", (found.source,))
    return c.roles.get(role, "bias") is not None


def input_norm(c: ComposerState) -> str:
    """The layer's first norm, or none on layer 0 when every layer but one stores it (ModernBERT-decoder)."""
    if "input_layernorm" in c.norm_exprs:  # on some layer types only (_by_layer_type)
        return c.norm_exprs["input_layernorm"]
    first = c.roles.get("norm.input")
    if first is not None and first.count == len(c.p.layers) - 1 > 0:
        c.words.append("no input norm on layer 0")
        return "norm(args, args.hidden_size) if i else nn.Identity()"
    return "norm(args, args.hidden_size)"


def norm_block(c: ComposerState, bias: bool, weightless: bool = False) -> str:
    norms = c.p.norms
    if weightless:
        if norms.offset:
            c.stub("weightless_norm", f"a {norms.kind} without a weight but with an offset is not in the block library")
        if norms.kind == "layernorm":
            c.words.insert(0, "LayerNorm without weight")
            return f"LayerNorm(dim, {c.eps()}, bias=False, weight=False)"
        c.words.insert(0, "RMSNorm without weight")
        return f"RMSNorm(dim, {c.eps()}, weight=False)"
    if norms.kind == "layernorm":
        c.words.insert(0, "LayerNorm" + (" with bias" if bias else "") + (" (1 + w)" if norms.offset else ""))
        return f"LayerNorm(dim, {c.eps()}, bias={bias}" + (", offset=1.0)" if norms.offset else ")")
    if bias:
        c.stub("rmsnorm_bias", "RMSNorm with a bias is not in the block library")
    c.words.insert(0, "RMSNorm" + (" (1 + w)" if norms.offset else ""))
    return f"RMSNorm(dim, {c.eps()}" + (", offset=1.0)" if norms.offset else ")")


def sub_norm(c: ComposerState, block: str) -> str:
    """`, sub_norm_eps=...` when the block normalises before its output projection (BitNet), else ''."""
    found = c.roles.get(f"{block}.sub_norm")
    if found is None:
        return ""
    if c.roles.get(f"{block}.sub_norm", "bias") is not None or c.p.norms.kind != "rms":
        c.stub(
            f"{block}_sub_norm",
            f"a {c.p.norms.kind} sub-norm (or one with a bias) before the output "
            f"projection is not in the block library: {found.template}",
        )
    c.wm.add(layer_target(("self_attn" if block == "attn" else "mlp") + ".sub_norm.weight"), (found.source,))
    c.words.append(f"RMSNorm before the {block} output projection")
    return f", sub_norm_eps={c.eps()}"


def qk_norm(c: ComposerState) -> str | None:
    r, d, norms = c.roles, c.p.dims, c.p.norms
    qn, kn = r.get("attn.q_norm"), r.get("attn.k_norm")
    qh, kh = r.get("attn.q_norm_heads"), r.get("attn.k_norm_heads")
    if not (qn or kn or qh or kh):
        return None
    kind = "layer" if norms.kind == "layernorm" else "rms"
    qb, kb = r.get("attn.q_norm", "bias"), r.get("attn.k_norm", "bias")
    stacked = [b for b in (r.get(x, "bias") for x in ("attn.q_norm_heads", "attn.k_norm_heads")) if b]
    bias = bool(qb and kb and qn and kn and kind == "layer" and not stacked)
    if bias:  # one LayerNorm per q and k with weight and bias (Persimmon)
        c.wm.add(layer_target("self_attn.q_norm.bias"), (qb.source,))  # type: ignore[union-attr]
        c.wm.add(layer_target("self_attn.k_norm.bias"), (kb.source,))  # type: ignore[union-attr]
    elif qb or kb or stacked:
        c.stub(
            "qk_norm_bias",
            "QK-norm with a bias is in the block library only as a LayerNorm on both q "
            f"and k with one weight each: {templates(qb, kb, *stacked)}",
        )
    if qh and kh:
        scope = "per_head_weight"
        c.wm.add(layer_target("self_attn.q_norm.weight"), (qh.source,), "stack")
        c.wm.add(layer_target("self_attn.k_norm.weight"), (kh.source,), "stack")
    elif qn and kn:
        last = qn.shape[-1] if qn.shape else 0
        scope = "per_head_weight" if len(qn.shape) == 2 else "head" if last == d.head_dim else "all"
        c.wm.add(layer_target("self_attn.q_norm.weight"), (qn.source,))
        c.wm.add(layer_target("self_attn.k_norm.weight"), (kn.source,))
    else:
        c.stub("qk_norm", f"a norm on queries or keys only: {templates(qn, kn, qh, kh)}")
        return None
    if kind == "rms" and scope == "per_head_weight":
        c.stub("qk_norm", "RMS QK-norm with one weight per head is not in the block library")
        return None
    extra = "" if kind == "rms" else ', kind="layer"'
    extra += "" if scope == "head" else f', scope="{scope}"'
    extra += ", offset=1.0" if norms.offset else ""
    extra += ", bias=True" if bias else ""
    c.words.append(f"QK-norm ({kind}, {scope}" + (", with bias)" if bias else ")"))
    return f"qk_norm=QKNormSpec({c.eps()}{extra})"
