"""Composition's state and the rules that do not depend on the tensors: which features and mixer kinds become stubs,
which config keys an adapter must read, guard or may ignore, and per-layer pattern expressions."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from onboard.generate_adapter.adapter_spec import AdapterSpec
from onboard.generate_adapter.compose_knowledge import FAMILY_FACTS, GUARD_FIELDS, GUARDS, ROPE_TYPE_NAMES
from onboard.generate_adapter.weight_inference import TensorRoles, WeightMapBuilder, WeightRule
from onboard.names.config import spellings
from onboard.names.config_keys import STRUCTURAL_KEYS, neutral_for_adapters
from onboard.profile import ModelProfile, quantized_feature, rope_feature

# Features the composer handles (beyond rope types, checked against the rotary block's table).
HANDLED_FEATURES = frozenset({
    "gqa", "mqa", "mla", "tied_embeddings", "interleaved_attention", "dense_first_layers", "sliding_window",
    "nope_layers", "moe", "shared_experts", "router_correction_bias", "sigmoid_router", "qk_norm", "attention_sinks",
    "attn_softcap", "final_softcap", "mtp", "logit_scaling", "embedding_scaling", "residual_scaling",
    "attention_multiplier", "query_pre_attn_scalar", "norm_offset", "layernorm", "sandwich_norm", "post_norm",
    "post_ln_norm",
    "parallel_residual", "partial_rotary", "qkv_bias", "absolute_positions", "plain_mlp", "alibi", "no_positions",
    "chunked_attention", "nope_temperature", "kv_shared_layers", "double_wide_mlp", "values_from_keys",
    "per_layer_embeddings", "moe_beside_mlp", "query_heads_per_layer", "attention_output_gate", "router_softcap",
    "head_transform", "multimodal",
})  # fmt: skip
MIXER_STUBS = {
    "linear": "linear-attention layers (fixed-state recurrence) are not in the block library",
    "ssm": "state-space (Mamba) layers are not in the block library",
    "conv": "short-convolution mixer layers are not in the block library",
    "none": "layers without a token mixer are not composed",
}
FEATURE_STUBS = {
    "bidirectional_attention": "attention over later tokens too (use_bidirectional_attention): adapters are causal",
}


@dataclass(frozen=True)
class Stub:
    op: str
    reason: str


@dataclass
class Fields:
    """ModelArgs fields a composition needs, in first-use order: (name, annotation, default repr or None: required)."""

    items: dict[str, tuple[str, str, str | None]] = field(default_factory=dict)

    def need(self, name: str, annotation: str = "int", default: str | None = None) -> str:
        self.items.setdefault(name, (name, annotation, default))
        return f"args.{name}"


@dataclass(frozen=True)
class AdapterPlan:
    """What the adapter for a profile composes (adapters/<model_type>.py), and the kernel stubs it needs first."""

    model_type: str
    spec: AdapterSpec
    weight_rules: tuple[WeightRule, ...]
    stubs: tuple[Stub, ...] = ()  # each rendered as kernels/<op>.py + tests/kernels/test_<op>.py
    closest_family: str | None = None
    overrides: tuple[str, ...] = ()  # family facts applied (compose_knowledge.FAMILY_FACTS)
    reads: frozenset[str] = frozenset()  # config keys the adapter reads (every spelling) or knows to be neutral

    @property
    def runnable(self) -> bool:
        return not self.stubs


class ComposerState:
    """compose.Composer's state and helpers, here so the parts in their own modules (compose_moe.py, ...) can use
    them without importing compose, which imports them."""

    def __init__(self, profile: ModelProfile) -> None:
        self.p = profile
        self.roles = TensorRoles(profile)
        self.wm = WeightMapBuilder(self.roles)
        self.fields = Fields()
        self.stubs: list[Stub] = feature_stubs(profile)
        self.facts = dict(FAMILY_FACTS.get(profile.model_type, {}))
        self.used_facts: list[str] = []
        self.post_init: list[str] = []
        self.extra_aliases: dict[str, tuple[str, ...]] = {}
        self.words: list[str] = []
        self.rotary_head_dim: str | None = None
        self.positions: str | None = None
        self.side_mixer: str | None = None
        self.embed_norm = False
        self.final_norm = True
        self.embed_width = "args.hidden_size"
        self.guard_tests: dict[str, tuple[str, str]] = {}  # config key -> (test, reason) replacing its GUARDS entry
        self.norm_exprs: dict[str, str] = {}  # a norm only some layer types have -> its expression (compose_norms)
        self.mixers: dict[str, str] = {}  # inspect's mixer kind -> the block expression composed for such layers
        self.moe_output_norm = False  # the post-MLP norm is the MoE block's output norm (compose_moe)
        self.mlp_reads_residual = False
        self.acknowledged: set[str] = set()  # config keys the profile shows to be neutral here (nothing to read)

    def stub(self, op: str, reason: str) -> None:
        self.stubs.append(Stub(op, reason))

    def fact(self, name: str, default: object = None) -> object:
        if name not in self.facts:
            return default
        used = f"{name}={self.facts[name]!r}"
        if used not in self.used_facts:  # a fact read by several parts is named once
            self.used_facts.append(used)
        return self.facts[name]

    def has_key(self, name: str) -> bool:
        return any(key in self.p.config_keys for key in spellings(name))

    def ignores(self, key: str) -> bool:
        """The family's modelling code never reads config key `key` (the family fact `ignored_keys`)."""
        return key in self.facts.get("ignored_keys", ())  # type: ignore[operator]

    def switched_bias(self, group: str, present: bool, rules: list[tuple[str, tuple[str, ...], str]]) -> str:
        """Whether `group`'s projections (qkv, o, mlp, head, mla) have a bias: the config key that switches it in the
        family's code (the family fact `bias_switches`), so one adapter serves checkpoints with and without; else
        what the tensors show. `rules` (target, sources, op) are added when the key switches a bias this checkpoint
        does not store (`.weight` sources read as `.bias`)."""
        for key, groups in dict(self.facts.get("bias_switches", {})).items():  # type: ignore[call-overload]
            if group in groups.split() and self.has_key(key):
                self.fact("bias_switches")  # applied: named among the facts used
                if not present:
                    for target, sources, op in rules:
                        self.wm.add(target, tuple(s.removesuffix(".weight") + ".bias" for s in sources), op)
                return self.fields.need(key, "bool", "False")
        return repr(present)

    def size(self, value: int, candidates: list[tuple[str, int | None]]) -> str:
        """The first config expression whose known value equals the size the tensors show, else the number."""
        for expr, known in candidates:
            if known == value:
                return expr
        return str(value)

    def eps(self) -> str:
        fixed = self.fact("norm_eps")
        if fixed is not None:  # the modelling code fixes it whatever config.json says (BioGPT: nn.LayerNorm(dim))
            self.acknowledged.update(spellings("rms_norm_eps"))
            return repr(float(fixed))  # type: ignore[arg-type]
        return self.fields.need("rms_norm_eps", "float", "1e-05" if self.p.norms.kind == "layernorm" else "1e-06")


def single_block_layers(p: ModelProfile) -> bool:
    """Every layer one block, a token mixer or a feed-forward block (Nemotron-H, Mamba-2), and some layer mixes tokens
    (feed-forward layers only is a mixer inspect did not recognise: xLSTM)."""
    layers = p.layers
    return any(layer.attention != "none" for layer in layers) and all(
        (layer.attention == "none") != (layer.mlp == "none") for layer in layers
    )


def feature_stubs(profile: ModelProfile) -> list[Stub]:
    """Mixer kinds, features, rope types and quantization the blocks cannot express."""
    out = [
        Stub(f"{kind}_layers", reason)
        for kind, reason in MIXER_STUBS.items()
        if any(layer.attention == kind for layer in profile.layers)
        and not (kind == "none" and single_block_layers(profile))
    ]
    out += [
        Stub(f"{k}_layers", f"layer type {k[8:]!r} is not known")
        for k in sorted({la.attention for la in profile.layers if la.attention.startswith("unknown:")})
    ]
    if any(layer.parallel_ssm for layer in profile.layers):
        out.append(Stub("parallel_ssm", "an SSM mixer beside attention in the same layer is not in the block library"))
    rope = rope_feature(profile.rope.type) if profile.rope else None
    quantized = quantized_feature(profile.quantization.method) if profile.quantization else None
    # quantization_config is a config fact: kept where inspect withholds the tensor-derived features (no weights)
    for feature in (*profile.features, *([quantized] if quantized and quantized not in profile.features else [])):
        if profile.rope and feature == rope:
            if (kind := profile.rope.type) not in ROPE_TYPE_NAMES:
                out.append(Stub(f"rope_{kind}", f"rope type {kind!r} is not in onboard.blocks.rotary"))
        elif profile.quantization and feature == quantized:
            method = profile.quantization.method
            out.append(Stub(f"dequant_{method}", f"weights are quantized ({method}); adapters load dense"))
        elif feature in FEATURE_STUBS:
            out.append(Stub(feature, FEATURE_STUBS[feature]))
        elif feature not in HANDLED_FEATURES and feature not in MIXER_FEATURES:
            out.append(Stub(feature, f"feature {feature!r} is not composed from the block library"))
    return out


MIXER_FEATURES = frozenset({"linear_attention", "ssm", "short_conv"})


def read_keys(fields: Fields, extra_aliases: dict[str, tuple[str, ...]], acknowledged: set[str]) -> frozenset[str]:
    """Every spelling of the ModelArgs fields, and the keys acknowledged."""
    read = {alias for name in fields.items for alias in spellings(name)} | acknowledged
    return frozenset(read | {alias for aliases in extra_aliases.values() for alias in aliases})


def config_key_stubs(profile: ModelProfile, read: frozenset[str]) -> list[Stub]:
    """A stub per config key of `profile` the adapter neither reads (`read`) nor knows to be harmless."""
    out = []
    for key in profile.config_keys:
        if key in read or key in STRUCTURAL_KEYS or neutral_for_adapters(key):
            continue
        if key.endswith(("_token_id", "_token_index")) or key in {s.op for s in out}:
            continue
        out.append(Stub(key, f"config.json field {key!r} is not read by any block"))
    return out


def guard_statements(
    profile: ModelProfile,
    fields: Fields,
    tests: dict[str, tuple[str, str]] | None = None,
    ignored: frozenset = frozenset(),
) -> list[str]:
    """Refusals of the GUARDS keys `profile` has (ModelArgs.__post_init__ statements): `tests` replaces a key's
    (test, reason) where the composition computes what GUARDS refuses; `ignored` keys get none."""
    out = []
    for key, (annotation, default, test, why) in GUARDS.items():
        if key not in profile.config_keys or key in ignored:
            continue
        test, why = (tests or {}).get(key, (test, why))
        fields.need(key, annotation, default)
        for name, ann, value in GUARD_FIELDS.get(key, ()):
            fields.need(name, ann, value)
        out.append(refusal(profile.model_type, key, test, why))
    return out


def refusal(model_type: str, key: str, test: str, why: str) -> str:
    """A ModelArgs.__post_init__ statement raising ConfigError when `test` (over self) holds for config key `key`."""
    return (
        f"if {test}:\n"
        "    raise ConfigError(\n"
        f'        f"{model_type}: {key}={{self.{key}!r}}: "\n'
        f'        "{why}",\n'
        '        "the composed adapter refuses it; add the computation to onboard.blocks",\n'
        "    )"
    )


def compress(values: list) -> tuple[int, int]:
    """(prefix length a, period p), smallest a + p, such that values[i] == values[a + (i - a) % p] for i >= a."""
    n = len(values)
    for total in range(1, n + 1):
        for a in range(total):
            p = total - a
            if all(values[i] == values[a + (i - a) % p] for i in range(a, n)):
                return a, p
    return n, 1


def pattern_expr(values: list, render) -> str:  # noqa: ANN001 - render: value -> source text
    """An expression over layer index `i` reproducing `values` and continuing its period for deeper checkpoints
    ('i >= 3', '(SLIDING, FULL)[i % 2]')."""
    a, p = compress(values)
    unit = [render(v) for v in values[a : a + p]]
    index = "i" if a == 0 else f"(i - {a})"
    cycle = unit[0] if p == 1 else f"({', '.join(unit)})[{index} % {p}]"
    if a == 0:
        return cycle
    prefix = [render(v) for v in values[:a]]
    if len(set(prefix)) == 1 and p == 1 and {prefix[0], cycle} == {"True", "False"}:
        return f"i >= {a}" if cycle == "True" else f"i < {a}"
    head = prefix[0] if len(set(prefix)) == 1 else f"({', '.join(prefix)}{',' if a == 1 else ''})[i]"
    return f"{head} if i < {a} else {cycle}"


def embedding_scale(profile: ModelProfile, fields: Fields) -> str:
    """The token-embedding multiplier: a config key when one is set, Gemma's sqrt(hidden) when inspect found that."""
    if any(key in profile.config_keys for key in spellings("embedding_multiplier")):
        return fields.need("embedding_multiplier", "float", "1.0")
    if "scale_embedding" in profile.config_keys:  # BioGPT, XGLM (and BART's family): sqrt(d_model) when set
        return f"args.hidden_size**0.5 if {fields.need('scale_embedding', 'bool', 'False')} else None"
    if "mup_enabled" in profile.config_keys:  # AFMoE: embeddings times sqrt(hidden) when muP is enabled
        return f"args.hidden_size**0.5 if {fields.need('mup_enabled', 'bool', 'False')} else None"
    m = profile.multipliers.embedding_multiplier
    if "embedding_scaling" not in profile.features or m is None:
        return "None"
    if math.isclose(m, math.sqrt(profile.dims.hidden_size)):
        return "args.hidden_size**0.5"
    return repr(m)


def op_name(text: str) -> str:
    """'self_attn.foo_gate' -> 'self_attn_foo_gate'."""
    name = re.sub(r"\W+", "_", text).strip("_").lower()
    return name if name and not name[0].isdigit() else f"op_{name}"
