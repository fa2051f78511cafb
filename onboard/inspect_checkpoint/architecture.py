"""From config.json (and tensor names, when the headers are there) to the architecture facts of a ModelProfile.

Table-driven, with no transformers import: it works for a model_type transformers does not know yet.
"""

from __future__ import annotations

from typing import Any

import msgspec

from onboard.errors import ConfigError
from onboard.findings import Finding, info, warning
from onboard.inspect_checkpoint import tensor_names as tn
from onboard.inspect_checkpoint.checkpoint_types import TensorInfo
from onboard.inspect_checkpoint.config_class_input import MAX_LAYERS
from onboard.inspect_checkpoint.config_view import TOWER_SECTIONS, ConfigView, tie_word_embeddings
from onboard.inspect_checkpoint.layer_plan import (
    class_layer_types,
    per_layer_tensors,
    plan_layers,
    shared_kv_sources,
    with_kv_widths,
    with_norm_names,
)
from onboard.inspect_checkpoint.moe_config import moe_from_config, moe_layers_from_config
from onboard.inspect_checkpoint.numerics import (
    FORCED_ACTIVATION,
    activation_from_config,
    multipliers_from_config,
    norms_from_config,
    qk_norm_flag_mismatch,
    rope_from_config,
)
from onboard.inspect_checkpoint.quant_bytes import ignored_modules
from onboard.inspect_checkpoint.ssm_config import ssm_from_config
from onboard.inspect_checkpoint.tensor_index import TensorIndex, language_view, shape_of
from onboard.names.config import kv_heads, num_layers_from_types, spellings
from onboard.profile import (
    Architecture,
    Biases,
    Dims,
    LayerInfo,
    ModelProfile,
    Quantization,
    Ssm,
)

PARALLEL_RESIDUAL_TYPES = {"gptj", "codegen", "phi", "cohere", "cohere2", "cohere2_moe", "cohere_compass_text",
                           "gpt_neox", "falcon", "stablelm"}  # fmt: skip


class ArchFacts(Architecture, frozen=True):
    """The architecture analysis: what a ModelProfile carries (profile.Architecture), plus what only feeds
    features.derive."""

    position_encoding: str  # rope | alibi | absolute | nope | none | unknown
    parallel_residual: bool
    ssm: Ssm | None = None
    layer_options: tuple[str, ...] = ()  # features from `_layer_options`
    head_transform: bool = False  # a dense, activation and norm before the LM head (ModernBERT-decoder)

    def profile_fields(self) -> dict[str, Any]:
        """The facts a ModelProfile carries, by field name."""
        carried = set(ModelProfile.__struct_fields__)
        return {name: getattr(self, name) for name in self.__struct_fields__ if name in carried}


def analyze(cv: ConfigView, index: TensorIndex | None) -> tuple[ArchFacts, list[Finding]]:
    findings: list[Finding] = []
    lm = language_view(index) if index is not None else None
    mla = cv.int("kv_lora_rank") is not None or (lm is not None and any("kv_a_proj" in n for n in lm))
    dims = _dims(cv, mla, lm)
    moe = moe_from_config(cv, lm)
    roles, moe_layers = per_layer_tensors(index, dims.num_layers) if index is not None else (None, None)
    # With tensors the MoE layout is read from them; these keys describe the same layout.
    cv.mark_used(
        "first_k_dense_replace",
        "moe_layer_freq",
        "decoder_sparse_step",
        "mlp_only_layers",
        "moe_layer_start_index",
        "moe_layer_interval",
        "interleave_moe_layer_step",
        "expert_layer_period",
        "expert_layer_offset",
        "num_dense_layers",
        "moe_layers",
    )
    if moe_layers is None and moe is not None:
        moe_layers = moe_layers_from_config(cv, dims.num_layers)
    layers, layer_findings = plan_layers(cv, dims.num_layers, mla, roles, moe_layers)
    findings += layer_findings
    if index is not None:
        layers = with_norm_names(with_kv_widths(layers, index), index)
    layers = with_kv_sources(cv, layers)
    if moe is not None and not any(layer.mlp == "moe" for layer in layers):
        # Expert counts set, yet no layer has experts (mlp_only_layers covers all, a dense-only variant): dense.
        findings.append(
            info(
                "moe-without-experts",
                f"config.json declares {moe.num_experts} experts but "
                f"{'the checkpoint stores no expert tensors' if index is not None else 'no layer is MoE'}"
                ": every MLP is dense",
                "nothing to do unless experts were expected",
            )
        )
        moe = None
    if moe is not None:
        dense_first = next((i for i, layer in enumerate(layers) if layer.mlp != "dense"), 0)
        moe = msgspec.structs.replace(moe, dense_first_layers=dense_first)
    ssm, ssm_findings = ssm_from_config(cv, dims, layers, lm)
    findings += ssm_findings
    rope, position = rope_from_config(cv, lm)
    norms = norms_from_config(cv, lm, dims)
    findings += qk_norm_flag_mismatch(cv, lm)
    activation = activation_from_config(cv)
    if cv.model_type in FORCED_ACTIVATION and activation != FORCED_ACTIVATION[cv.model_type]:
        findings.append(
            warning(
                "activation-overridden",
                f"config.json says hidden_act={activation!r} but "
                f"{cv.model_type} computes {FORCED_ACTIVATION[cv.model_type]!r} (tanh-approximate GELU)",
                "use the tanh approximation in every kernel; exact GELU shifts the logits",
            )
        )
        activation = FORCED_ACTIVATION[cv.model_type]
    tie = _tied(cv, lm)
    if lm is not None:
        has_head = any(tn.component(n) == "head" for n in lm)
        if tie and has_head:
            findings.append(
                info(
                    "tied-but-head-present",
                    "tie_word_embeddings is true but the checkpoint also stores an lm_head tensor",
                    "the loader must tie (ignore lm_head) as transformers does",
                )
            )
        if not tie and not has_head and lm:
            findings.append(
                warning(
                    "untied-head-missing",
                    "tie_word_embeddings is false but no lm_head tensor is "
                    "stored: a loader would leave the output layer random",
                    "check tie_word_embeddings in config.json",
                )
            )
    for field, expected in sorted(cv.type_errors.items()):
        findings.append(
            warning(
                "config-field-type",
                f"config.json field {field} should be {expected}; it was ignored",
                "fix the value's type in config.json",
                file="config.json",
            )
        )
    facts = ArchFacts(
        dims=dims,
        layers=layers,
        rope=rope,
        position_encoding=position,
        norms=norms,
        activation=activation,
        mlp_gated=_gated(cv, lm),
        biases=_biases(cv, lm),
        multipliers=multipliers_from_config(cv, dims),
        tie_word_embeddings=tie,
        attention_sinks=_sinks(cv, lm),
        moe=moe,
        mtp_layers=_mtp(cv, index, dims.num_layers),
        quantization=_quantization(cv, index),
        multimodal=_towers(cv, index),
        parallel_residual=_parallel(cv),
        ssm=ssm,
        layer_options=_layer_options(cv),
        head_transform=_head_transform(cv, lm),
    )
    return facts, findings


def with_kv_sources(cv: ConfigView, layers: tuple[LayerInfo, ...]) -> tuple[LayerInfo, ...]:
    """Each layer's KV source: Kolibri 1.1's kv_source_layers (layer i reads sources[i]), or the last
    num_kv_shared_layers layers reading the last earlier layer of their type (Gemma 3n / 4)."""
    n = len(layers)
    sources: dict[int, int] = {}
    declared = cv.get("kv_source_layers")
    shared = cv.int("num_kv_shared_layers", default=0) or 0
    if isinstance(declared, list) and len(declared) == n:
        sources = {i: s for i, s in enumerate(declared) if isinstance(s, int) and s != i}
    elif 0 < shared < n:
        types = class_layer_types(cv) or [layer.attention for layer in layers]
        found = shared_kv_sources(types[:n], shared) if len(types) >= n else {}
        sources = {i: s for i, s in found.items() if s is not None}
    if not sources:
        return layers
    return tuple(msgspec.structs.replace(layer, kv_source=sources.get(layer.index)) for layer in layers)


def _head_transform(cv: ConfigView, lm: dict[str, TensorInfo] | None) -> bool:
    """ModernBERT-decoder's prediction head: lm_head.dense, classifier_activation and lm_head.norm."""
    found = lm is not None and "lm_head.dense.weight" in lm and "lm_head.norm.weight" in lm
    if found or lm is None:
        cv.mark_used("classifier_activation")  # the transform's activation, which composition reads
    return found


def _layer_options(cv: ConfigView) -> tuple[str, ...]:
    """Layer options as features (features.FEATURES says what each means): Gemma 3n / 4's and Laguna's."""
    sources = cv.get("kv_source_layers")
    kv_shared = (cv.int("num_kv_shared_layers", default=0) or 0) > 0 or (
        isinstance(sources, list) and any(s != i for i, s in enumerate(sources))
    )
    heads = cv.get("num_attention_heads_per_layer")
    on = {
        "kv_shared_layers": kv_shared,
        "double_wide_mlp": cv.get("use_double_wide_mlp", default=False) is True and kv_shared,  # on those layers
        "values_from_keys": cv.get("attention_k_eq_v", default=False) is True,
        "bidirectional_attention": cv.get("use_bidirectional_attention", default=None) in (True, "all"),  # not "vision"
        "per_layer_embeddings": (cv.int("hidden_size_per_layer_input", default=0) or 0) > 0
        and cv.int("vocab_size_per_layer_input"),
        "moe_beside_mlp": cv.get("enable_moe_block", default=False) is True,
        "query_heads_per_layer": isinstance(heads, list) and len(set(heads)) > 1,
        "attention_output_gate": cv.get("gating", default=False) in (True, "per-head", "per-channel", "elementwise"),
        "router_softcap": (cv.float("moe_router_logit_softcapping", default=0.0) or 0.0) > 0.0,
    }
    return tuple(name for name, flag in on.items() if flag)


def _dims(cv: ConfigView, mla: bool, lm: dict[str, TensorInfo] | None) -> Dims:
    hidden = cv.int(*spellings("hidden_size"), default=0) or 0
    n_layers = cv.int(*spellings("num_hidden_layers"), default=0) or 0
    if not n_layers:  # Nemotron-H derives the layer count from its per-layer type list
        n_layers = num_layers_from_types(cv.quantity) or 0
    heads = cv.int(*spellings("num_attention_heads"), default=0) or 0
    kv = cv.int(*spellings("num_key_value_heads"), same_fact=True)
    kv = kv_heads(cv.quantity) or kv or heads
    if mla:
        cv.mark_used("q_lora_rank", "kv_lora_rank", "head_dim", "qk_head_dim")
        nope = cv.int("qk_nope_head_dim", default=0) or 0
        rope_dim = cv.int("qk_rope_head_dim", default=0) or 0
        head_dim = nope + rope_dim
        v_head_dim = cv.int("v_head_dim", default=head_dim)
    else:
        head_dim = cv.int(*spellings("head_dim"), default=0) or 0
        if not head_dim and heads:
            head_dim = hidden // heads
        # Values narrower or wider than queries and keys (MiMo-V2-Flash: 128 against 192); None: head_dim.
        v_dim = cv.int("v_head_dim")
        v_head_dim = v_dim if v_dim and v_dim != head_dim else None
    inter = cv.int(*spellings("intermediate_size"))
    # Llama 4's dense layers' width (its experts' is intermediate_size): the tensors show it
    cv.mark_used("intermediate_size_mlp")
    if inter is None and cv.model_type in ("gpt2", "gpt_bigcode", "gpt_neo", "gptj", "codegen", "falcon") and hidden:
        inter = 4 * hidden
    vocab = cv.int(*spellings("vocab_size"), default=0) or 0
    rows = shape_of(lm, "embed_tokens.weight") or shape_of(lm, "wte.weight") or shape_of(lm, "word_embeddings.weight")
    if rows is None:
        rows = shape_of(lm, "embed_in.weight") or shape_of(lm, "tok_embeddings.weight")
    if rows:
        vocab = rows[0]
    max_pos = cv.int(*spellings("max_position_embeddings"))
    _check_plausible(
        hidden=hidden,
        num_hidden_layers=n_layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        head_dim=head_dim,
        vocab_size=vocab,
    )
    return Dims(
        hidden,
        n_layers,
        heads,
        kv,
        head_dim,
        inter if isinstance(inter, int) and inter >= 0 else None,
        vocab,
        max_pos if isinstance(max_pos, int) and max_pos > 0 else None,
        v_head_dim,
    )


# Generous upper bounds: a config beyond them is corrupt, and building per-layer plans for it would exhaust memory.
_LIMITS = {"hidden": 1 << 20, "num_hidden_layers": MAX_LAYERS, "num_attention_heads": 1 << 14, "num_key_value_heads": 1 << 14,
           "head_dim": 1 << 14, "vocab_size": 1 << 26}  # fmt: skip


def _check_plausible(**values: int) -> None:
    for name, value in values.items():
        if value < 0 or value > _LIMITS[name]:
            raise ConfigError(
                f"config.json: {name}={value} is not a plausible value (0..{_LIMITS[name]})",
                "the config is corrupt or not a transformers config; fix the field",
            )


def _gated(cv: ConfigView, lm: dict[str, TensorInfo] | None) -> bool | None:
    if lm is None:
        return None
    names = [n for n in lm if tn.in_layer(n)]
    # mlp.Wi: ModernBERT's fused [activated; gate] rows; experts.mlp.v1: DBRX's up rows beside its gate w1 (no suffix)
    gated_keys = (
        "gate_proj",
        "gate_up_proj",
        ".w3.",
        "w1.weight",
        "dense_h_to_4h_gate",
        "up_gate_proj",
        ".wi_0",
        "mlp.Wi.",
        "experts.mlp.v1",
    )
    return any(k in n for n in names for k in gated_keys if tn.component(n) in ("mlp", "experts", "shared_experts"))


def _biases(cv: ConfigView, lm: dict[str, TensorInfo] | None) -> Biases:
    if lm is None:
        b = cv.bool("attention_bias", "qkv_bias", "bias", "use_bias", "add_bias_linear")
        return Biases(
            attention_qkv=b,
            attention_out=cv.bool("attention_bias", "bias", "use_bias"),
            mlp=cv.bool("mlp_bias", "bias", "use_bias"),
        )
    layer0 = [n for n in lm if tn.in_layer(n) and n.endswith(".bias")]
    qkv = any(
        k in n for n in layer0 for k in ("q_proj", "k_proj", "v_proj", "qkv", "query_key_value", "c_attn", "Wqkv")
    )
    out = any(
        k in n
        for n in layer0
        for k in ("o_proj", "attn.c_proj", "attention.dense", "out_proj", "self_attention.dense", "attn.dense")
    )
    mlp = any(tn.component(n) in ("mlp", "experts", "shared_experts") for n in layer0)
    head = any(n.endswith(("lm_head.bias", "embed_out.bias")) or n == "decoder.bias" for n in lm)
    # the tensors show these (ModernBERT-decoder: decoder_bias on the projection, classifier_bias on its dense)
    cv.mark_used("attention_bias", "mlp_bias", "qkv_bias", "bias", "use_bias", "decoder_bias", "classifier_bias")
    return Biases(qkv, out, mlp, head)


def _tied(cv: ConfigView, lm: dict[str, TensorInfo] | None) -> bool:
    value = tie_word_embeddings(cv.raw)  # a wrapper's own flag counts too (config_view.tie_word_embeddings)
    if value is None:
        value = cv.get(*spellings("tie_word_embeddings")[1:])
    cv.mark_used("tie_word_embeddings")
    if value is None:  # transformers' default is True when the key is absent
        return True if lm is None else not any(tn.component(n) == "head" for n in lm)
    if value and lm:
        # A stored head of another shape than the embedding cannot be tied: the model keeps both (CPM-Ant's
        # embedding also holds prompt tokens; its head covers the vocabulary only).
        head = next((t.shape for n, t in lm.items() if tn.component(n) == "head" and n.endswith("weight")), None)
        embed = next(
            (
                t.shape
                for n, t in lm.items()
                if tn.component(n) == "embedding"
                and len(t.shape) == 2
                and not n.endswith((*tn.LEARNED_POSITIONS, "position_embeddings.weight"))
            ),
            None,
        )
        if head is not None and embed is not None and head != embed:
            return False
    return bool(value)


def _sinks(cv: ConfigView, lm: dict[str, TensorInfo] | None) -> bool:
    if lm is not None:
        suffixes = (*(f".{name}" for name in tn.SINK_NAMES), ".attention_sink", ".sink", "attn_sinks")
        return any(n.endswith(suffixes) for n in lm)
    return cv.model_type == "gpt_oss" or cv.bool("use_attention_sinks", "attention_sinks")


def _mtp(cv: ConfigView, index: TensorIndex | None, n_layers: int) -> int:
    """MTP layers: declared in config (DeepSeek appends them as layers ≥ num_hidden_layers) or named `mtp`."""
    declared = cv.int(*spellings("num_nextn_predict_layers"), default=0) or 0
    # Nemotron-H's block types inside each MTP layer (its config class writes a default even without MTP layers):
    # the layers are counted from the declared number or the tensors, whatever their insides.
    cv.mark_used("mtp_layers_block_type")
    if index is None:
        return declared
    mtp_groups = [g for g in index.groups if g.template.startswith("mtp.") or ".mtp." in g.template]
    if mtp_groups:
        return len({tn.layer_index(n) for n in index.names_of(mtp_groups)})
    if not declared:
        return 0
    norms = [g for g in index.groups if tn.in_layer(g.template) and tn.component_of_template(g.template) == "norms"]
    return len({i for i in map(tn.layer_index, index.names_of(norms)) if i is not None and i >= n_layers})


def _quantization(cv: ConfigView, index: TensorIndex | None) -> Quantization | None:
    qc = cv.get("quantization_config", "quantization")
    scale_suffixes: set[str] = set()
    if index is not None:
        for name in (g.template for g in index.groups):
            tail = name.rsplit(".", 1)[-1]
            if tn.component(name) == "quant_scales" or tail.endswith(("_blocks", "_scales", "scale_inv")):
                scale_suffixes.add(tail)
    if not isinstance(qc, dict):
        if scale_suffixes:
            return Quantization(method="unknown", scale_tensors=tuple(sorted(scale_suffixes)))
        return None
    method = str(qc.get("quant_method") or qc.get("method") or "unknown")
    block = qc.get("weight_block_size") or qc.get("block_size")
    if block is None and qc.get("group_size"):
        block = [qc["group_size"]]
    groups = qc.get("config_groups")
    if block is None and isinstance(groups, dict):  # compressed-tensors
        for group in groups.values():
            weights = group.get("weights") if isinstance(group, dict) else None
            if isinstance(weights, dict) and weights.get("group_size"):
                block = [weights["group_size"]]
                break
    fmt = qc.get("fmt") or qc.get("format") or (f"{qc['bits']}bit" if qc.get("bits") else None)
    if isinstance(block, int):
        block = [block]
    return Quantization(
        method=method,
        fmt=str(fmt) if fmt else None,
        block_size=tuple(int(b) for b in block) if isinstance(block, list) else None,
        scale_tensors=tuple(sorted(scale_suffixes)),
        ignored_modules=ignored_modules(qc),
    )


def _towers(cv: ConfigView, index: TensorIndex | None) -> tuple[str, ...]:
    towers = {tower for key, tower in TOWER_SECTIONS.items() if isinstance(cv.raw.get(key), dict)}
    if index is not None:
        towers |= {t for t in (tn.tower_of(g.template) for g in index.groups) if t}
    return tuple(sorted(towers))


def _parallel(cv: ConfigView) -> bool:
    explicit = cv.get("use_parallel_residual", "parallel_attn", "parallel_block", "use_parallel_block")
    if explicit is not None:
        return bool(explicit)
    return cv.model_type in PARALLEL_RESIDUAL_TYPES - {"gpt_neox", "falcon"}
