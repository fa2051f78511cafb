"""Token mixers of a composition besides standard attention, as expressions over the block library plus the weight
rules that fill them: DeepSeek's multi-head latent attention (with DeepSeek-V3.2's sparse-attention indexer), LFM2's
gated short convolution, Qwen3-Next / Qwen3.5's Gated DeltaNet and Mamba (compose_mamba.py) on the layers
config.json's layer_types names."""

from __future__ import annotations

from onboard.generate_adapter.adapter_spec import attention
from onboard.generate_adapter.compose_mamba import mamba
from onboard.generate_adapter.compose_rules import ComposerState
from onboard.generate_adapter.weight_inference import layer_target, templates

LAYER_TYPE_NAMES = {"conv": "conv", "linear": "linear_attention", "ssm": "linear_attention"}
"""Inspect's mixer kinds -> the layer_types entry transformers gives such a layer (LFM2, Qwen3-Next / Qwen3.5, and
the Mamba-2 layers of Bamba / Granite-4.0, which transformers also calls linear_attention)."""
FEED_FORWARD_LAYER_TYPES = {"dense": "mlp", "moe": "moe"}
"""Inspect's feed-forward kinds -> the layer_types entry of a layer that is only that block (Nemotron-H)."""


def layer_mixers(c: ComposerState) -> list[tuple[str, str]]:
    """(inspect's mixer kind, expression) for each kind of non-attention layer the block library composes; a kind
    whose tensors are not the known ones is left out (its `<kind>_layers` stub stands)."""
    found = (("conv", short_conv(c)), ("linear", gated_deltanet(c)), ("ssm", mamba(c)))
    return [(kind, expr) for kind, expr in found if expr]


def mla_expression(c: ComposerState) -> str:
    """DeepSeek's multi-head latent attention (with DeepSeek-V3.2's sparse top-k indexer where stored)."""
    r, f = c.roles, c.fields
    for part in r.parts("mla"):
        c.wm.add(layer_target(f"self_attn.{part.part}.{part.param}"), (part.source,))
    q, o = r.get("attn.q"), r.get("attn.o")
    if o is None or r.get("mla", "weight", "kv_b_proj") is None:
        c.stub("mla_projections", "MLA without kv_b_proj / o_proj is not in the block library")
        return attention()
    if q is not None:
        c.wm.add(layer_target("self_attn.q_proj.weight"), (q.source,))
    c.wm.add(layer_target("self_attn.o_proj.weight"), (o.source,))
    present = r.get("mla", "bias", "kv_a_proj_with_mqa") is not None
    if present:
        c.wm.add(layer_target("self_attn.o_proj.bias"), (r.get("attn.o", "bias").source,))  # type: ignore[union-attr]
    # MLA's `bias` switches q_a_proj's, kv_a_proj_with_mqa's and o_proj's (the bias named as its weight)
    biased = [
        (layer_target(f"self_attn.{p.part}.bias"), (p.source,), "copy")
        for p in r.parts("mla")
        if p.param == "weight" and p.part in ("q_a_proj", "kv_a_proj_with_mqa")
    ]
    bias = c.switched_bias("mla", present, [*biased, (layer_target("self_attn.o_proj.bias"), (o.source,), "copy")])
    if any(layer.window for layer in c.p.layers):  # dots.llm3's sliding_attention layers (inspect: MLA + window)
        c.stub(
            "mla_sliding_window",
            "latent attention on sliding-window layers: the MLA block attends to every earlier key",
        )
    f.need("q_lora_rank", "int | None", "None")
    for name in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
        f.need(name, "int", None)
    interleave = repr(bool(c.fact("mla_rope_interleave", False)))
    rope_interleave = f.need("rope_interleave", "bool", interleave) if c.has_key("rope_interleave") else interleave
    c.rotary_head_dim = "args.qk_rope_head_dim"
    c.words.append("multi-head latent attention")
    # The latent norms' eps: DeepSeek's code fixes it (1e-6); dots.llm3's reads rms_norm_eps
    latent_eps = c.eps() if c.fact("mla_latent_norm_eps") == "config" else "MLA_LATENT_NORM_EPS"
    return (
        "MLAttention(args.hidden_size, args.num_attention_heads, q_lora_rank=args.q_lora_rank, "
        "kv_lora_rank=args.kv_lora_rank, qk_nope_head_dim=args.qk_nope_head_dim, "
        "qk_rope_head_dim=args.qk_rope_head_dim, v_head_dim=args.v_head_dim, "
        f"rms_norm_eps={latent_eps}, bias={bias}, scale=mla_scale(args.qk_nope_head_dim + "
        "args.qk_rope_head_dim, rope_config(args, FULL, args.qk_rope_head_dim)), "
        f"rope_interleaved={rope_interleave}{_sparse_indexer(c)}{_dots_variant(c)})"
    )


def _dots_variant(c: ComposerState) -> str:
    """dots.llm3's additions to MLA, as keyword arguments ('' for DeepSeek's): latent scales (code only: a family
    fact), an RMSNorm on the rotary key head (its tensor), a sigmoid gate per head (g_proj, one row per head)."""
    out = ""
    if c.fact("mla_latent_scale"):
        out += ", latent_scale=True"
        c.words.append("q / kv latents scaled by sqrt(hidden / rank)")
    if c.roles.get("mla", "weight", "k_rope_only_layernorm") is not None:
        out += f", k_rope_norm_eps={c.eps()}"
        c.words.append("an RMSNorm on the rotary key head")
    gate = c.roles.get("attn.g_gate")
    if gate is not None:
        per_head = bool(gate.shape) and gate.shape[0] == c.p.dims.num_attention_heads
        if c.fact("attention_gate_fn") != "sigmoid" or not per_head:
            c.stub(
                "attention_g_proj",
                f"{gate.template}: an output gate on latent attention other than one sigmoid "
                "per head (the function only the family's code says: compose_knowledge attention_gate_fn)",
            )
            return out
        c.wm.add(layer_target("self_attn.g_proj.weight"), (gate.source,))
        out += ", head_gate=True"
        c.words.append("sigmoid output gate per head (g_proj)")
    return out


def _sparse_indexer(c: ComposerState) -> str:
    """`, indexer=IndexerSpec(...)` for DeepSeek Sparse Attention's top-k indexer ('' without one)."""
    parts = c.roles.parts("mla.indexer")
    if not parts:
        return ""
    for part in parts:
        c.wm.add(layer_target(f"self_attn.indexer.{part.part}.{part.param}"), (part.source,))
    found = {(part.part, part.param) for part in parts}
    expected = {
        ("wq_b", "weight"),
        ("wk", "weight"),
        ("k_norm", "weight"),
        ("k_norm", "bias"),
        ("weights_proj", "weight"),
    }
    if found != expected or c.roles.get("mla", "weight", "q_a_proj") is None:
        c.stub(
            "sparse_indexer",
            "a top-k indexer whose tensors are not DeepSeek-V3.2's (wq_b on the q latent, "
            f"wk, a LayerNorm k_norm, weights_proj): {templates(*parts)}",
        )
    f = c.fields
    spec = ", ".join(f.need(name, "int", None) for name in ("index_n_heads", "index_head_dim", "index_topk"))
    interleaved = bool(c.fact("indexer_rope_interleaved", False))
    c.words.append(
        f"DeepSeek sparse attention (top-k indexer, {'interleaved' if interleaved else 'half-split'} rotary)"
    )
    return f", indexer=IndexerSpec({spec}" + (", rope_interleaved=True)" if interleaved else ")")


def short_conv(c: ComposerState) -> str:
    """LFM2's gated short convolution on the `conv` layers ('' where no layer is one)."""
    if not any(layer.attention == "conv" for layer in c.p.layers):
        return ""
    parts = c.roles.parts("conv")
    weights = {x.part for x in parts if x.param == "weight"}
    biases = {x.part for x in parts if x.param == "bias"}
    if weights != {"in_proj", "conv", "out_proj"} or biases not in (set(), weights):
        return ""  # the conv_layers stub stands, and the unknown tensors are named
    for x in parts:
        c.wm.add(layer_target(f"self_attn.{x.part}.{x.param}"), (x.source,))
    kernel = c.fields.need("conv_L_cache", "int", None) if c.has_key("conv_L_cache") else None
    kernel = kernel or str(next(x.shape[-1] for x in parts if x.part == "conv" and x.param == "weight"))
    bias = c.fields.need("conv_bias", "bool", "False") if c.has_key("conv_bias") else repr(bool(biases))
    c.words.append("gated short convolution on the conv layers")
    return f"ShortConv(args.hidden_size, {kernel}, bias={bias})"


def gated_deltanet(c: ComposerState) -> str:
    """Gated DeltaNet on the linear-attention layers ('' where none is one, or its tensors are not those of
    Qwen3-Next (grouped in_proj_qkvz / in_proj_ba), Qwen3.5 (in_proj_qkv, _z, _b, _a), Lara-mini (one in_proj) or
    FLA (OLMo-hybrid: q / k / v / g / b / a projections and a convolution per q / k / v))."""
    if not any(layer.attention == "linear" for layer in c.p.layers):
        return ""
    parts = {x.part: x for x in c.roles.parts("deltanet")}
    if "out_norm" in parts and "norm" not in parts:  # Lara-mini's name for the gated norm
        parts["norm"] = parts.pop("out_norm")
    common = {"conv1d", "out_proj", "norm", "dt_bias", "A_log"}
    grouped = set(parts) == common | {"in_proj_qkvz", "in_proj_ba"}
    fused = set(parts) == common | {"in_proj"}
    fla = set(parts) == set(FLA_PARTS) | {"dt_bias", "A_log"}
    if not (grouped or fused or fla) and set(parts) != common | {"in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a"}:
        return ""  # the linear_layers stub stands, and the tensors are named
    if fla:  # each target from its FLA parts, q / k / v rows (and their convolutions' channels) concatenated
        for target, sources in FLA_PARTS_OF.items():
            c.wm.add(
                layer_target(f"self_attn.{target}"),
                tuple(parts[s].source for s in sources),
                "cat" if len(sources) > 1 else "copy",
            )
        parts = {n: x for n, x in parts.items() if n in ("dt_bias", "A_log")}
    for name, x in parts.items():
        if grouped and name in ("in_proj_qkvz", "in_proj_ba"):
            for target in ("in_proj_qkv", "in_proj_z") if name == "in_proj_qkvz" else ("in_proj_b", "in_proj_a"):
                c.wm.add(layer_target(f"self_attn.{target}.weight"), (x.source,), "grouped_rows")
        elif fused and name == "in_proj":  # [q | k | v | z | b | a] in turn
            for target in ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a"):
                c.wm.add(layer_target(f"self_attn.{target}.weight"), (x.source,), "fused_rows")
        else:
            c.wm.add(layer_target(f"self_attn.{name}" + (f".{x.param}" if x.param else "")), (x.source,))
    dims = ", ".join(
        c.fields.need(f"linear_{n}", "int", None)
        for n in ("num_key_heads", "num_value_heads", "key_head_dim", "value_head_dim", "conv_kernel_dim")
    )
    layout = (
        ", grouped projections"
        if grouped
        else ", one fused input projection"
        if fused
        else ", FLA's separate projections"
        if fla
        else ""
    )
    c.words.append("Gated DeltaNet on the linear-attention layers" + layout)
    # beta = 2 sigmoid(b) lets the state transition's eigenvalues reach -1 (FLA's allow_neg_eigval)
    beta = (
        f", allow_neg_eigval={c.fields.need('linear_allow_neg_eigval', 'bool', 'False')}"
        if c.has_key("linear_allow_neg_eigval")
        else ""
    )
    eps = c.fact("deltanet_norm_eps")  # the gated norm's eps where the code fixes it (FLA's FusedRMSNormGated: 1e-5)
    return f"GatedDeltaNet(args.hidden_size, {dims}, {eps if eps is not None else c.eps()}, args.hidden_act{beta})"


# FLA's Gated DeltaNet parts (OLMo-hybrid) -> the block's parameters: q, k, v rows in that order, as the block's
# in_proj_qkv and conv1d hold them.
FLA_PARTS_OF: dict[str, tuple[str, ...]] = {
    "in_proj_qkv.weight": ("q_proj", "k_proj", "v_proj"),
    "conv1d.weight": ("q_conv1d", "k_conv1d", "v_conv1d"),
    "in_proj_z.weight": ("g_proj",),
    "in_proj_b.weight": ("b_proj",),
    "in_proj_a.weight": ("a_proj",),
    "out_proj.weight": ("o_proj",),
    "norm.weight": ("o_norm",),
}
FLA_PARTS = tuple(part for parts in FLA_PARTS_OF.values() for part in parts)
