"""Token mixers besides standard attention, as block expressions plus the weight rules that fill them: multi-head
latent attention (with DeepSeek-V3.2's sparse indexer), LFM2's short convolution, Gated DeltaNet, and Mamba
(Mamba-2: in_proj gives z, xBC and dt per head; Mamba-1: x_proj and dt_proj give dt, B and C) on the layers
config.json's layer_types names."""

from __future__ import annotations

from onboard.generate_adapter.adapter_spec import attention
from onboard.generate_adapter.compose_rules import ComposerState, refusal
from onboard.generate_adapter.weight_inference import layer_target, templates
from onboard.names.config import BARE_HEAD_KEYS, SSM_KEYS

# Inspect's mixer kinds -> transformers' layer_types entry (Bamba's Mamba-2 layers are linear_attention too)
LAYER_TYPE_NAMES = {"conv": "conv", "linear": "linear_attention", "ssm": "linear_attention"}
# Inspect's feed-forward kinds -> the layer_types entry of a layer that is only that block (Nemotron-H)
FEED_FORWARD_LAYER_TYPES = {"dense": "mlp", "moe": "moe"}


def layer_mixers(c: ComposerState) -> list[tuple[str, str]]:
    """(inspect's mixer kind, expression) for each non-attention layer kind whose tensors are known ones."""
    found = (("conv", short_conv(c)), ("linear", gated_deltanet(c)), ("ssm", mamba(c)))
    return [(kind, expr) for kind, expr in found if expr]


def mla_expression(c: ComposerState) -> str:
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
    """dots.llm3's additions to MLA ('' for DeepSeek's): latent scales, a rotary-key norm, a sigmoid gate per head."""
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
    expected = {(part, "weight") for part in ("wq_b", "wk", "k_norm", "weights_proj")} | {("k_norm", "bias")}
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
    """Gated DeltaNet on the linear-attention layers, from Qwen3-Next's, Qwen3.5's, Lara-mini's or FLA's (OLMo-hybrid)
    tensors ('' otherwise)."""
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
    layouts = {
        ", grouped projections": grouped,
        ", one fused input projection": fused,
        ", FLA's separate projections": fla,
    }
    c.words.append("Gated DeltaNet on the linear-attention layers" + next((k for k, v in layouts.items() if v), ""))
    # beta = 2 sigmoid(b) lets the state transition's eigenvalues reach -1 (FLA's allow_neg_eigval)
    beta = ""
    if c.has_key("linear_allow_neg_eigval"):
        beta = f", allow_neg_eigval={c.fields.need('linear_allow_neg_eigval', 'bool', 'False')}"
    eps = c.fact("deltanet_norm_eps")  # the gated norm's eps where the code fixes it (FLA's FusedRMSNormGated: 1e-5)
    return f"GatedDeltaNet(args.hidden_size, {dims}, {eps if eps is not None else c.eps()}, args.hidden_act{beta})"


# FLA's Gated DeltaNet parts (OLMo-hybrid) -> the block's parameters (q, k, v rows in that order).
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


MAMBA2_PARTS = {("in_proj", "weight"), ("conv1d", "weight"), ("out_proj", "weight"), ("dt_bias", None),
                ("A_log", None), ("D", None)}  # fmt: skip
MAMBA2_NORM = {("norm", "weight")}  # the gated norm: every Mamba-2 family's, Falcon-H1's with mamba_rms_norm
MAMBA1_PARTS = {("in_proj", "weight"), ("conv1d", "weight"), ("x_proj", "weight"), ("dt_proj", "weight"),
                ("dt_proj", "bias"), ("out_proj", "weight"), ("A_log", None), ("D", None)}  # fmt: skip
MAMBA1_NORMS = {("dt_layernorm", "weight"), ("b_layernorm", "weight"), ("c_layernorm", "weight")}  # Jamba
MAMBA_ALIASES = {field: names + tuple(filter(None, [BARE_HEAD_KEYS.get(field)])) for field, names in SSM_KEYS.items()}
"""Each Mamba knob under every family's spelling, in inspect's order (names.config.SSM_KEYS), then Mamba-2's bare head
names."""
MAMBA_BIASES = ({("conv1d", "bias")}, {("in_proj", "bias"), ("out_proj", "bias")})
"""Optional, each all or none: the convolution's bias and the projections'."""


def mamba(c: ComposerState) -> str:
    """Mamba-1 or -2 on the state-space layers ('' where no layer is one, or its tensors are neither's)."""
    if not any(layer.attention == "ssm" for layer in c.p.layers):
        return ""
    return _mixer(c, "self_attn", versions=(1, 2))


def parallel_mamba(c: ComposerState) -> str:
    """A Mamba-2 mixer beside attention in every layer (Falcon-H1, as `mamba`), or ''."""
    if not any(layer.parallel_ssm for layer in c.p.layers):
        return ""
    return _mixer(c, "mamba", versions=(2,))


def _mixer(c: ComposerState, target: str, versions: tuple[int, ...]) -> str:
    """The Mamba mixer expression, its tensors mapped under each layer's `target`; '' for unknown tensors."""
    parts = c.roles.parts("mamba")
    found = {(x.part, x.param) for x in parts}
    version = 2 if MAMBA2_PARTS <= found else 1 if MAMBA1_PARTS <= found else None
    extra = found - (MAMBA2_PARTS if version == 2 else MAMBA1_PARTS)
    optional = [*MAMBA_BIASES, *([MAMBA1_NORMS] if version == 1 else [MAMBA2_NORM])]
    if (
        version not in versions
        or extra - set().union(*optional)
        or any(extra & part not in (set(), part) for part in optional)
    ):
        return ""  # the ssm_layers stub stands, and the tensors are named
    for x in parts:
        c.wm.add(layer_target(f"{target}.{x.part}" + (f".{x.param}" if x.param else "")), (x.source,))
    c.extra_aliases.update(MAMBA_ALIASES)
    f = c.fields
    conv_bias = f.need("mamba_conv_bias", "bool", repr(("conv1d", "bias") in found))
    proj_bias = f.need("mamba_proj_bias", "bool", repr(("in_proj", "bias") in found))
    act = f.need("mamba_hidden_act", "str", '"silu"')
    c.post_init.append(
        "if self.layer_types is not None:  # older names for the same types (mamba, attention)\n"
        "    self.layer_types = [LEGACY_LAYER_TYPES.get(t, t) for t in self.layer_types]"
    )
    options = f"conv_bias={conv_bias}, proj_bias={proj_bias}, activation={act}"
    return _mamba2(c, options, MAMBA2_NORM <= found) if version == 2 else _mamba1(c, options, MAMBA1_NORMS <= found)


def _mamba2(c: ComposerState, options: str, norm: bool) -> str:
    f = c.fields
    dims = ", ".join(
        f.need(name, "int", None)
        for name in ("mamba_n_heads", "mamba_d_head", "mamba_d_state", "mamba_n_groups", "mamba_d_conv")
    )
    limit = f.need("time_step_limit", "tuple[float, float] | list[float] | None", "None")
    if any(key in c.p.config_keys for key in ("mamba_expand", *MAMBA_ALIASES["mamba_expand"])):
        # Bamba's "auto": the head width that fills mamba_expand x hidden
        f.need("mamba_expand", "int", "2")
        c.post_init.append(
            'if self.mamba_d_head == "auto":\n'
            "    self.mamba_d_head = self.mamba_expand * self.hidden_size // self.mamba_n_heads"
        )
    options += _falcon_h1_options(c, norm)
    c.words.append("Mamba-2 on the state-space layers")
    return f"Mamba2Mixer(args.hidden_size, {dims}, {options}, norm_eps={c.eps()}, time_step_limit={limit})"


def _mamba1(c: ComposerState, options: str, weighted_norms: bool) -> str:
    """Mamba-1: Falcon-Mamba's weightless norms on dt, B and C from its mixer_rms_eps key, Jamba's from the tensors."""
    f = c.fields
    expand, state = f.need("mamba_expand", "int", "2"), f.need("mamba_d_state", "int", None)
    rank, kernel = f.need("mamba_dt_rank", "int", None), f.need("mamba_d_conv", "int", None)
    norms = ""
    if weighted_norms:
        norms = f', bc_norm="weighted", norm_eps={c.eps()}'
    elif "mixer_rms_eps" in c.p.config_keys:
        norms = f', bc_norm="weightless", norm_eps={f.need("mixer_rms_eps", "float", "1e-06")}'
    c.words.append("Mamba on the state-space layers" + (" (RMS norms on dt, B, C)" if norms else ""))
    return f"MambaMixer(args.hidden_size, {expand} * args.hidden_size, {state}, {rank}, {kernel}, {options}{norms})"


def _falcon_h1_options(c: ComposerState, norm: bool) -> str:
    """Falcon-H1's Mamba-2 options, each from the config key that sets it."""
    f, out = c.fields, ""
    if c.has_key("mamba_rms_norm") or not norm:
        out += f", gated_norm={f.need('mamba_rms_norm', 'bool', repr(norm))}"
    if c.has_key("mamba_norm_before_gate"):
        out += f", norm_before_gate={f.need('mamba_norm_before_gate', 'bool', 'False')}"
    if c.has_key("ssm_in_multiplier"):
        out += f", in_multiplier={f.need('ssm_in_multiplier', 'float', '1.0')}"
    if c.has_key("ssm_multipliers"):
        out += f", zxbcdt_multipliers={f.need('ssm_multipliers', 'list[float] | None', 'None')}"
    if c.has_key("projectors_bias"):
        out += f", out_bias={f.need('projectors_bias', 'bool', 'False')}"
    if c.has_key("mamba_d_ssm"):  # the mixer's width, which the block takes as heads x head_dim
        f.need("mamba_d_ssm", "int | None", "None")
        c.post_init.append(
            refusal(
                c.p.model_type,
                "mamba_d_ssm",
                "self.mamba_d_ssm not in (None, self.mamba_n_heads * self.mamba_d_head)",
                "a Mamba-2 width other than mamba_n_heads x mamba_d_head",
            )
        )
    return out
