"""What the adapter template renders: an `AdapterSpec`, filled by composition (compose.py) from a ModelProfile;
templates/adapter.py.j2 turns it into `adapters/<model_type>.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Fields almost every decoder config has: (name, annotation, default repr or None when required).
BASE_FIELDS: tuple[tuple[str, str, str | None], ...] = (
    ("hidden_size", "int", None),
    ("num_hidden_layers", "int", None),
    ("num_attention_heads", "int", None),
    ("vocab_size", "int", None),
    ("intermediate_size", "int", None),
    ("num_key_value_heads", "int | None", "None"),
    ("head_dim", "int | None", "None"),
    ("max_position_embeddings", "int", "2048"),
    ("rms_norm_eps", "float", "1e-06"),
    ("hidden_act", "str", '"silu"'),
    ("tie_word_embeddings", "bool", "False"),
    ("rope_parameters", "dict[str, Any] | None", "None"),
    ("rope_scaling", "dict[str, Any] | None", "None"),
    ("rope_theta", "float | None", "None"),
    ("rope_local_base_freq", "float | None", "None"),  # old-style Gemma 3: the sliding layers' base
    ("partial_rotary_factor", "float | None", "None"),
    ("sliding_window", "int | None", "None"),
    ("layer_types", "list[str] | None", "None"),
)


def attention(*extra: str, kv_heads: str = "args.num_key_value_heads", heads: str = "args.num_attention_heads") -> str:
    """The Attention constructor with extra keyword arguments ("name=expr"); `kv_heads`, `heads`: per-layer
    expressions where layers differ."""
    head = f"Attention(args.hidden_size, {heads}, {kv_heads}, args.head_dim"
    return head + "".join(f", {e}" for e in extra) + ")"


@dataclass(frozen=True)
class AdapterSpec:
    """Expressions are over `args` (the ModelArgs), `i` (the layer index), `layer_type` and `window`."""

    model_type: str
    summary: str  # what the model is, in block terms (the adapter's docstring)
    attention: str
    mlp: str
    norm: str = "RMSNorm(dim, args.rms_norm_eps)"
    placement: str = "pre"  # pre | post | post_ln | sandwich | parallel | ... : see adapter_source.FORWARD
    norm_names: tuple[str, ...] = ("input_layernorm", "post_attention_layernorm")
    fields: tuple[tuple[str, str, str | None], ...] = ()
    """Extra ModelArgs fields, or BASE_FIELDS entries with another default."""
    aliases: dict[str, tuple[str, ...]] = field(default_factory=dict)
    layer_type: str = "FULL"  # each layer's type when config.json has no `layer_types` (over self, i)
    moe_layer: str | None = None  # over self, i: True where layer i has the MoE block (None: no MoE switch)
    rope_kind: str = "FULL"  # layer i's rotary table: FULL, layer_type (per-type bases), None (NoPE), or an expression
    rotary_head_dim: str | None = None
    embed_scale: str = "None"
    lm_head: tuple[str, ...] = ()
    residual_scale: str | None = None
    residual_fp32: str | None = None
    """The residual stream kept in float32 between layers ("single" placement; Mamba-2's residual_in_fp32)."""
    post_init: tuple[str, ...] = ()
    """Statements run first in ModelArgs.__post_init__: derived defaults, refusals of values the blocks lack."""
    dropped: tuple[str, ...] = ()
    positions: str | None = None  # learned or sinusoidal absolute positions (`model.embed_positions`)
    embed_norm: bool = False  # the family's norm on the embeddings before the first layer (`model.embed_norm`)
    embed_width: str = "args.hidden_size"
    """The token embeddings' width; another than hidden_size adds `model.project_in` (the head projects back)."""
    final_norm: bool = True  # False for post-LN layers, whose output is normalised already
    side_mixer: str | None = None
    """A token mixer beside attention in every layer (`self.mamba`, Falcon-H1), with `mixer_scales`: (attention
    input, attention output, mixer output) multipliers."""
    mixer_scales: str = "(1.0, 1.0, 1.0)"
    per_layer_args: bool = False  # each layer reads `args.for_layer(i)` (per_layer_config: Gemma 4)
    kv_source: str | None = None  # the earlier layer whose keys and values layer i attends over (None: its own)
    layer_scalar: bool = False  # the layer's output times a stored scalar (Gemma 4)
    input_norm: str = "norm(args, args.hidden_size)"  # the layer's first norm (ModernBERT-decoder's layer 0: none)
    norm_exprs: tuple[tuple[str, str], ...] = ()
    """(norm name, expression) for the norms not every layer type has ("by_layer_type" placement)."""
    mlp_reads_residual: bool = False  # `self.mlp(norm(x), x)`: DenseBesideMoE
    per_layer_inputs: str | None = None  # the model's per-layer embeddings (`model.per_layer_inputs`)
    layer_gate: str | None = None  # the layer's gate of its per-layer input (`self.per_layer`)
