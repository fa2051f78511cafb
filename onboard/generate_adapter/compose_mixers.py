"""Token mixers of a composition besides standard attention, as expressions over the block library plus the weight
rules that fill them: DeepSeek's multi-head latent attention (with DeepSeek-V3.2's sparse-attention indexer), LFM2's
gated short convolution, Qwen3-Next / Qwen3.5's Gated DeltaNet and the hybrids' Mamba-2 on the layers config.json's
layer_types names."""

from __future__ import annotations

from onboard.generate_adapter.arch_parts import attention
from onboard.generate_adapter.compose_rules import ComposerParts
from onboard.generate_adapter.weight_inference import layer_target, templates

LAYER_TYPE_NAMES = {"conv": "conv", "linear": "linear_attention", "ssm": "linear_attention"}
"""Inspect's mixer kinds -> the layer_types entry transformers gives such a layer (LFM2, Qwen3-Next / Qwen3.5, and
the Mamba-2 layers of Bamba / Granite-4.0, which transformers also calls linear_attention)."""


def layer_mixers(c: ComposerParts) -> list[tuple[str, str]]:
    """(inspect's mixer kind, expression) for each kind of non-attention layer the block library composes; a kind
    whose tensors are not the known ones is left out (its `<kind>_layers` stub stands)."""
    found = (("conv", short_conv(c)), ("linear", gated_deltanet(c)), ("ssm", mamba(c)))
    return [(kind, expr) for kind, expr in found if expr]


def mla_expression(c: ComposerParts) -> str:
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
    bias = r.get("mla", "bias", "kv_a_proj_with_mqa") is not None
    if bias:
        c.wm.add(layer_target("self_attn.o_proj.bias"), (r.get("attn.o", "bias").source,))  # type: ignore[union-attr]
    f.need("q_lora_rank", "int | None", "None")
    for name in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
        f.need(name, "int", None)
    interleave = repr(bool(c.fact("mla_rope_interleave", False)))
    rope_interleave = f.need("rope_interleave", "bool", interleave) if c.has_key("rope_interleave") else interleave
    c.rotary_head_dim = "args.qk_rope_head_dim"
    c.words.append("multi-head latent attention")
    return (
        "MLAttention(args.hidden_size, args.num_attention_heads, q_lora_rank=args.q_lora_rank, "
        "kv_lora_rank=args.kv_lora_rank, qk_nope_head_dim=args.qk_nope_head_dim, "
        "qk_rope_head_dim=args.qk_rope_head_dim, v_head_dim=args.v_head_dim, "
        f"rms_norm_eps=MLA_LATENT_NORM_EPS, bias={bias}, scale=mla_scale(args.qk_nope_head_dim + "
        "args.qk_rope_head_dim, rope_config(args, FULL, args.qk_rope_head_dim)), "
        f"rope_interleaved={rope_interleave}{_sparse_indexer(c)})"
    )


def _sparse_indexer(c: ComposerParts) -> str:
    """`, indexer=IndexerSpec(...)` for DeepSeek Sparse Attention's top-k indexer ('' without one)."""
    parts = c.roles.parts("mla.indexer")
    if not parts:
        return ""
    for part in parts:
        c.wm.add(layer_target(f"self_attn.indexer.{part.part}.{part.param}"), (part.source,))
    found = {(part.part, part.param) for part in parts}
    expected = {("wq_b", "weight"), ("wk", "weight"), ("k_norm", "weight"), ("k_norm", "bias"),
                ("weights_proj", "weight")}  # fmt: skip
    if found != expected or c.roles.get("mla", "weight", "q_a_proj") is None:
        c.stub("sparse_indexer", "a top-k indexer whose tensors are not DeepSeek-V3.2's (wq_b on the q latent, "
                  f"wk, a LayerNorm k_norm, weights_proj): {templates(*parts)}")  # fmt: skip
    f = c.fields
    spec = ", ".join(f.need(name, "int", None) for name in ("index_n_heads", "index_head_dim", "index_topk"))
    interleaved = bool(c.fact("indexer_rope_interleaved", False))
    c.words.append(f"DeepSeek sparse attention (top-k indexer, {'interleaved' if interleaved else 'half-split'}"
                      " rotary)")  # fmt: skip
    return f", indexer=IndexerSpec({spec}" + (", rope_interleaved=True)" if interleaved else ")")


def short_conv(c: ComposerParts) -> str:
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


def gated_deltanet(c: ComposerParts) -> str:
    """Gated DeltaNet on the linear-attention layers ('' where none is one, or its tensors are not those of
    Qwen3-Next (grouped in_proj_qkvz / in_proj_ba) or Qwen3.5 (in_proj_qkv, _z, _b, _a))."""
    if not any(layer.attention == "linear" for layer in c.p.layers):
        return ""
    parts = {x.part: x for x in c.roles.parts("deltanet")}
    common = {"conv1d", "out_proj", "norm", "dt_bias", "A_log"}
    grouped = set(parts) == common | {"in_proj_qkvz", "in_proj_ba"}
    if not grouped and set(parts) != common | {"in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a"}:
        return ""  # the linear_layers stub stands, and the tensors are named
    for name, x in parts.items():
        if grouped and name in ("in_proj_qkvz", "in_proj_ba"):
            for target in ("in_proj_qkv", "in_proj_z") if name == "in_proj_qkvz" else ("in_proj_b", "in_proj_a"):
                c.wm.add(layer_target(f"self_attn.{target}.weight"), (x.source,), "grouped_rows")
        else:
            c.wm.add(layer_target(f"self_attn.{name}" + (f".{x.param}" if x.param else "")), (x.source,))
    dims = ", ".join(c.fields.need(f"linear_{n}", "int", None) for n in ("num_key_heads", "num_value_heads",
                     "key_head_dim", "value_head_dim", "conv_kernel_dim"))  # fmt: skip
    c.words.append("Gated DeltaNet on the linear-attention layers" + (", grouped projections" if grouped else ""))
    return f"GatedDeltaNet(args.hidden_size, {dims}, {c.eps()}, args.hidden_act)"


FEED_FORWARD_LAYER_TYPES = {"dense": "mlp", "moe": "moe"}
"""Inspect's feed-forward kinds -> the layer_types entry of a layer that is only that block (Nemotron-H)."""

MAMBA2_PARTS = {("in_proj", "weight"), ("conv1d", "weight"), ("out_proj", "weight"), ("norm", "weight"),
                ("dt_bias", None), ("A_log", None), ("D", None)}  # fmt: skip
MAMBA1_PARTS = {("in_proj", "weight"), ("conv1d", "weight"), ("x_proj", "weight"), ("dt_proj", "weight"),
                ("dt_proj", "bias"), ("out_proj", "weight"), ("A_log", None), ("D", None)}  # fmt: skip
MAMBA1_NORMS = {("dt_layernorm", "weight"), ("b_layernorm", "weight"), ("c_layernorm", "weight")}
"""Jamba's weighted RMS norms on dt, B and C (all three or none)."""
MAMBA_ALIASES = {
    "mamba_n_heads": ("mamba_num_heads", "num_heads"), "mamba_d_head": ("mamba_head_dim", "head_dim"),
    "mamba_d_state": ("ssm_state_size", "state_size"), "mamba_n_groups": ("n_groups",), "mamba_d_conv": ("conv_kernel",),
    "mamba_conv_bias": ("use_conv_bias",), "mamba_proj_bias": ("use_bias",), "mamba_expand": ("expand",),
    "mamba_hidden_act": ("hidden_act",), "mamba_dt_rank": ("time_step_rank",),
}  # fmt: skip
"""Mamba sizes under Bamba's / Jamba's names (the fields), then Nemotron-H's and Mamba's (mamba_num_heads, num_heads,
state_size, time_step_rank ...)."""
MAMBA_BIASES = ({("conv1d", "bias")}, {("in_proj", "bias"), ("out_proj", "bias")})
"""Optional: the convolution's bias (mamba_conv_bias) and the projections' (mamba_proj_bias), each all or none."""


def mamba(c: ComposerParts) -> str:
    """Mamba on the state-space layers: Mamba-2 (in_proj gives z, xBC and dt per head; Bamba, Granite-4.0, Mamba-2,
    Nemotron-H) or Mamba-1 (x_proj and dt_proj give dt, B and C; Mamba, Falcon-Mamba, Jamba). '' where no layer is
    one, or its tensors are neither's. Sizes from config.json; which layers are Mamba from layer_types, else from
    attn_layer_indices (Bamba)."""
    if not any(layer.attention == "ssm" for layer in c.p.layers):
        return ""
    parts = c.roles.parts("mamba")
    found = {(x.part, x.param) for x in parts}
    version = 2 if MAMBA2_PARTS <= found else 1 if MAMBA1_PARTS <= found else None
    extra = found - (MAMBA2_PARTS if version == 2 else MAMBA1_PARTS)
    optional = [*MAMBA_BIASES, *([MAMBA1_NORMS] if version == 1 else [])]
    if version is None or extra - set().union(*optional) or any(extra & part not in (set(), part) for part in optional):
        return ""  # the ssm_layers stub stands, and the tensors are named
    for x in parts:
        c.wm.add(layer_target(f"self_attn.{x.part}" + (f".{x.param}" if x.param else "")), (x.source,))
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
    return _mamba2(c, options) if version == 2 else _mamba1(c, options, MAMBA1_NORMS <= found)


def _mamba2(c: ComposerParts, options: str) -> str:
    f = c.fields
    dims = ", ".join(f.need(name, "int", None) for name in ("mamba_n_heads", "mamba_d_head", "mamba_d_state",
                                                             "mamba_n_groups", "mamba_d_conv"))  # fmt: skip
    limit = f.need("time_step_limit", "tuple[float, float] | list[float] | None", "None")
    if any(key in c.p.config_keys for key in ("mamba_expand", *MAMBA_ALIASES["mamba_expand"])):
        # Bamba's "auto": the head width that fills mamba_expand x hidden
        f.need("mamba_expand", "int", "2")
        c.post_init.append('if self.mamba_d_head == "auto":\n'
                           "    self.mamba_d_head = self.mamba_expand * self.hidden_size // self.mamba_n_heads")  # fmt: skip
    c.words.append("Mamba-2 on the state-space layers")
    return f"Mamba2Mixer(args.hidden_size, {dims}, {options}, norm_eps={c.eps()}, time_step_limit={limit})"


def _mamba1(c: ComposerParts, options: str, weighted_norms: bool) -> str:
    """Mamba-1. Falcon-Mamba's weightless RMS norms on dt, B and C are read from its mixer_rms_eps (the key is how
    its config says it has them); Jamba's weighted ones from the tensors."""
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
