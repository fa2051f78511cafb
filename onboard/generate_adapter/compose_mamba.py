"""Mamba token mixers of a composition, as expressions over onboard.blocks.mamba / .mamba2 plus the weight rules that
fill them: Mamba-2 (in_proj gives z, xBC and dt per head: Bamba, Granite-4.0, Mamba-2, Nemotron-H) and Mamba-1 (x_proj
and dt_proj give dt, B and C: Mamba, Falcon-Mamba, Jamba), on the layers inspect found state-space."""

from __future__ import annotations

from onboard.generate_adapter.compose_rules import ComposerState, refusal
from onboard.generate_adapter.weight_inference import layer_target
from onboard.names.config import BARE_HEAD_KEYS, SSM_KEYS

MAMBA2_PARTS = {("in_proj", "weight"), ("conv1d", "weight"), ("out_proj", "weight"), ("dt_bias", None),
                ("A_log", None), ("D", None)}  # fmt: skip
MAMBA2_NORM = {("norm", "weight")}
"""The gated RMS norm's weight: every Mamba-2 family's, Falcon-H1's only with mamba_rms_norm."""
MAMBA1_PARTS = {("in_proj", "weight"), ("conv1d", "weight"), ("x_proj", "weight"), ("dt_proj", "weight"),
                ("dt_proj", "bias"), ("out_proj", "weight"), ("A_log", None), ("D", None)}  # fmt: skip
MAMBA1_NORMS = {("dt_layernorm", "weight"), ("b_layernorm", "weight"), ("c_layernorm", "weight")}
"""Jamba's weighted RMS norms on dt, B and C (all three or none)."""
MAMBA_ALIASES = {field: names + tuple(filter(None, [BARE_HEAD_KEYS.get(field)])) for field, names in SSM_KEYS.items()}
"""Each Mamba knob (a field under Bamba's / Jamba's name) under every family's spelling, in the order inspect reads
them (names.config.SSM_KEYS; the field's own name among them), then Mamba-2's bare head names."""
MAMBA_BIASES = ({("conv1d", "bias")}, {("in_proj", "bias"), ("out_proj", "bias")})
"""Optional: the convolution's bias (mamba_conv_bias) and the projections' (mamba_proj_bias), each all or none."""


def mamba(c: ComposerState) -> str:
    """Mamba on the state-space layers: Mamba-2 (in_proj gives z, xBC and dt per head; Bamba, Granite-4.0, Mamba-2,
    Nemotron-H) or Mamba-1 (x_proj and dt_proj give dt, B and C; Mamba, Falcon-Mamba, Jamba). '' where no layer is
    one, or its tensors are neither's. Sizes from config.json; which layers are Mamba from layer_types, else from
    attn_layer_indices (Bamba)."""
    if not any(layer.attention == "ssm" for layer in c.p.layers):
        return ""
    return _mixer(c, "self_attn", versions=(1, 2))


def parallel_mamba(c: ComposerState) -> str:
    """A Mamba-2 mixer beside attention in every layer (Falcon-H1, as `mamba`); '' where no layer has one, or its
    tensors are not Mamba-2's (the parallel_ssm stub stands)."""
    if not any(layer.parallel_ssm for layer in c.p.layers):
        return ""
    return _mixer(c, "mamba", versions=(2,))


def _mixer(c: ComposerState, target: str, versions: tuple[int, ...]) -> str:
    """The Mamba mixer expression, its tensors mapped under `target` of each layer; '' when the tensors are not a
    known version's."""
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


def _falcon_h1_options(c: ComposerState, norm: bool) -> str:
    """Falcon-H1's Mamba-2 options, each from the config key that sets it: the gated norm only with mamba_rms_norm
    (and its order), the input multiplier, the muP multipliers of in_proj's five parts, out_proj's own bias."""
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
