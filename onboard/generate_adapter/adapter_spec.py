"""What the adapter template renders: an `AdapterSpec`, filled by composition (compose.py) from a ModelProfile.

Each field is data or a Python expression over `args` (the ModelArgs), `i` (the layer index), `layer_type` and
`window`; templates/adapter.py.j2 turns them into `adapters/<model_type>.py` and the parity harness proves the result
against transformers.
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
    """The standard Attention constructor with extra keyword arguments ("name=expr"); `kv_heads`, `heads`:
    expressions of the layer (`i`, `layer_type`) where layers differ."""
    head = f"Attention(args.hidden_size, {heads}, {kv_heads}, args.head_dim"
    return head + "".join(f", {e}" for e in extra) + ")"


@dataclass(frozen=True)
class AdapterSpec:
    model_type: str
    summary: str
    """One line: what the model is, in block terms (goes into the adapter's docstring)."""
    attention: str
    mlp: str
    norm: str = "RMSNorm(dim, args.rms_norm_eps)"
    placement: str = "pre"
    """pre | post | post_ln | sandwich | parallel | parallel2 | single | parallel_ssm | by_layer_type: see
    adapter_source.FORWARD."""
    norm_names: tuple[str, ...] = ("input_layernorm", "post_attention_layernorm")
    fields: tuple[tuple[str, str, str | None], ...] = ()
    """Extra ModelArgs fields, or BASE_FIELDS entries with another default."""
    aliases: dict[str, tuple[str, ...]] = field(default_factory=dict)
    layer_type: str = "FULL"
    """Default per-layer attention type when config.json has no `layer_types` (expression over self, i)."""
    moe_layer: str | None = None
    """Expression over self, i: True where layer i has the MoE block (None: no MoE switch)."""
    rope_kind: str = "FULL"
    """Which rotary table layer i uses: FULL, layer_type (per-type bases), None (NoPE), or an expression."""
    rotary_head_dim: str | None = None
    embed_scale: str = "None"
    lm_head: tuple[str, ...] = ()
    residual_scale: str | None = None
    residual_fp32: str | None = None
    """Expression over args: the residual stream kept in float32 between layers ("single" placement; Mamba-2's
    residual_in_fp32), the layer's norm reading it cast back to the weights' dtype."""
    post_init: tuple[str, ...] = ()
    """Statements run first in ModelArgs.__post_init__: derived defaults, refusals of config values the blocks
    cannot express."""
    dropped: tuple[str, ...] = ()
    positions: str | None = None
    """Learned absolute position embeddings (`model.embed_positions`), an expression over `args` (GPT-2 style)."""
    embed_norm: bool = False
    """The family's norm applied to the embeddings before the first layer (`model.embed_norm`, NanoChat)."""
    embed_width: str = "args.hidden_size"
    """The token embeddings' width, an expression over args; another than hidden_size adds `model.project_in` to the
    layers' width (the head's transform projects back: OPT-350m)."""
    final_norm: bool = True
    """A norm after the last layer (`model.norm`); False for post-LN layers, whose output is normalised already."""
    side_mixer: str | None = None
    """A token mixer beside attention in every layer (`self.mamba`, Falcon-H1's Mamba-2; "parallel_ssm" placement),
    with `mixer_scales`, an expression over args: (attention input, attention output, mixer output) multipliers."""
    mixer_scales: str = "(1.0, 1.0, 1.0)"
    per_layer_args: bool = False
    """Each layer reads its args through `args.for_layer(i)` (config.json's per_layer_config overrides: Gemma 4)."""
    kv_source: str | None = None
    """Expression over args, i, layer_type: the earlier layer whose keys and values layer i attends over (None: its
    own); the layer's `kv_source`, which AdapterModel.forward and `Attention(kv_shared=...)` act on."""
    layer_scalar: bool = False
    """The layer's output times a stored scalar (`layer_scalar`, Gemma 4)."""
    input_norm: str = "norm(args, args.hidden_size)"
    """Expression over args, i: the layer's first norm (ModernBERT-decoder's layer 0 has none: nn.Identity())."""
    norm_exprs: tuple[tuple[str, str], ...] = ()
    """(norm name, expression over args, i, layer_type) for the norms not every layer has (the "by_layer_type"
    placement: None where a layer type has no such norm; the first norm's is input_norm too); the others are
    norm(args, hidden)."""
    mlp_reads_residual: bool = False
    """The feed-forward block also reads the layer's residual (`self.mlp(norm(x), x)`: DenseBesideMoE)."""
    per_layer_inputs: str | None = None
    """Expression over args: the model's per-layer embeddings (`model.per_layer_inputs`, a PerLayerInputs)."""
    layer_gate: str | None = None
    """Expression over args: the layer's gate of its per-layer input (`self.per_layer`, a PerLayerGate), added to the
    residual after the MLP."""
