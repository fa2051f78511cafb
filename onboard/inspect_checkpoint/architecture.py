"""From config.json (and tensor names, when the headers are there) to the architecture facts of a ModelProfile.

Pure Python and table-driven: no transformers import, so it works for a model_type transformers does not know yet
and costs milliseconds. Every config read goes through ConfigView, which records what was consumed for the lint.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass, replace

from onboard.errors import ConfigError
from onboard.findings import Finding, info, warning
from onboard.inspect_checkpoint import tensor_names as tn
from onboard.inspect_checkpoint.checkpoint_types import TensorInfo
from onboard.inspect_checkpoint.config_view import TOWER_SECTIONS, ConfigView
from onboard.inspect_checkpoint.layer_plan import plan_layers
from onboard.inspect_checkpoint.tensor_index import TensorIndex
from onboard.profile import Biases, Dims, LayerInfo, Moe, Multipliers, Norms, Quantization, Rope

# Families that apply the RMSNorm weight as (1 + w).
NORM_OFFSET_TYPES = {"gemma", "gemma2", "gemma3", "gemma3_text", "gemma3n_text", "recurrent_gemma", "vaultgemma",
                     "qwen3_next", "qwen3_5", "qwen3_5_moe", "gemma4", "gemma4_text", "t5gemma", "nemotron"}  # fmt: skip
# Families whose norm is RMSNorm although the config key says layer_norm_epsilon.
RMS_NORM_TYPES = {"mamba", "mamba2", "falcon_mamba", "nemotron_h", "bamba", "zamba", "zamba2", "jamba"}
# Families scaling the token embedding by sqrt(hidden_size) in the forward pass.
SQRT_EMBED_SCALE_TYPES = {"gemma", "gemma2", "gemma3", "gemma3_text", "recurrent_gemma", "vaultgemma", "gemma4_text"}
# Routers that score with a sigmoid (DeepSeek-V3 style) rather than a softmax.
SIGMOID_ROUTER_TYPES = {"deepseek_v3", "glm4_moe", "dots1", "llama4_text", "llama4", "kimi_k2", "longcat_flash",
                        "deepseek_v32", "glm_moe_dsa", "ernie4_5_moe", "minimax_m2", "bailing_moe", "afmoe"}  # fmt: skip
# Families that run attention and MLP in parallel from the same normed input.
PARALLEL_RESIDUAL_TYPES = {"gptj", "codegen", "phi", "cohere", "cohere2", "gpt_neox", "falcon", "stablelm"}
# Per-family activation forced by the modelling code regardless of the config value (BUGZOO B19).
FORCED_ACTIVATION = {"gemma": "gelu_pytorch_tanh"}


@dataclass(frozen=True)
class ArchFacts:
    dims: Dims
    layers: tuple[LayerInfo, ...]
    rope: Rope | None
    position_encoding: str
    """rope | alibi | absolute | none"""
    norms: Norms
    activation: str | None
    mlp_gated: bool | None
    biases: Biases
    multipliers: Multipliers
    tie_word_embeddings: bool
    attention_sinks: bool
    moe: Moe | None
    mtp_layers: int
    quantization: Quantization | None
    multimodal: tuple[str, ...]
    parallel_residual: bool


def analyze(cv: ConfigView, index: TensorIndex | None) -> tuple[ArchFacts, list[Finding]]:
    findings: list[Finding] = []
    lm = _language_view(index) if index is not None else None
    mla = cv.int("kv_lora_rank") is not None or (lm is not None and any("kv_a_proj" in n for n in lm))
    dims = _dims(cv, mla, lm)
    moe = _moe(cv, lm)
    roles, moe_layers = _per_layer_tensors(index, dims.num_layers) if index is not None else (None, None)
    # With tensors the MoE layout is read from them; these keys describe the same layout.
    cv.mark_used("first_k_dense_replace", "moe_layer_freq", "decoder_sparse_step", "mlp_only_layers",
                 "moe_layer_start_index", "moe_layer_interval", "interleave_moe_layer_step", "expert_layer_period",
                 "expert_layer_offset", "num_dense_layers")  # fmt: skip
    if moe_layers is None and moe is not None:
        moe_layers = _moe_layers_from_config(cv, dims.num_layers)
    layers, layer_findings = plan_layers(cv, dims.num_layers, mla, roles, moe_layers)
    findings += layer_findings
    if index is not None:
        layers = _with_kv_widths(layers, index)
    if moe is not None:
        dense_first = 0
        for layer in layers:
            if layer.mlp != "dense":
                break
            dense_first += 1
        moe = Moe(**{**moe.__dict__, "dense_first_layers": dense_first if dense_first < len(layers) else 0})
    rope, position = _rope(cv, lm)
    norms = _norms(cv, lm, dims)
    activation = _activation(cv)
    if cv.model_type in FORCED_ACTIVATION and activation != FORCED_ACTIVATION[cv.model_type]:
        findings.append(warning("activation-overridden", f"config.json says hidden_act={activation!r} but "
                                f"{cv.model_type} computes {FORCED_ACTIVATION[cv.model_type]!r} (tanh-approximate GELU)",
                                "use the tanh approximation in every kernel; exact GELU shifts the logits"))  # fmt: skip
        activation = FORCED_ACTIVATION[cv.model_type]
    tie = _tied(cv, lm)
    if lm is not None:
        has_head = any(tn.component(n) == "head" for n in lm)
        if tie and has_head:
            findings.append(info("tied-but-head-present", "tie_word_embeddings is true but the checkpoint also "
                                 "stores an lm_head tensor", "the loader must tie (ignore lm_head) as transformers does"))  # fmt: skip
        if not tie and not has_head and lm:
            findings.append(warning("untied-head-missing", "tie_word_embeddings is false but no lm_head tensor is "
                                    "stored: a loader would leave the output layer random",
                                    "check tie_word_embeddings in config.json"))  # fmt: skip
    for field, expected in sorted(cv.type_errors.items()):
        findings.append(warning("config-field-type", f"config.json field {field} should be {expected}; it was ignored",
                                "fix the value's type in config.json", file="config.json"))  # fmt: skip
    facts = ArchFacts(
        dims=dims,
        layers=layers,
        rope=rope,
        position_encoding=position,
        norms=norms,
        activation=activation,
        mlp_gated=_gated(cv, lm),
        biases=_biases(cv, lm),
        multipliers=_multipliers(cv, dims),
        tie_word_embeddings=tie,
        attention_sinks=_sinks(cv, lm),
        moe=moe,
        mtp_layers=_mtp(cv, index, dims.num_layers),
        quantization=_quantization(cv, index),
        multimodal=_towers(cv, index),
        parallel_residual=_parallel(cv),
    )
    return facts, findings


def _language_view(index: TensorIndex) -> dict[str, TensorInfo]:
    """Language-model tensor *templates* (wrapper prefixes removed) → the first tensor of each group.

    Checks below look at name shapes (`layers.{}.self_attn.sinks`), never at every tensor: see tensor_index.py.
    """
    out: dict[str, TensorInfo] = {}
    for g in index.groups:
        if tn.tower_of(g.template) is None:
            key = tn.strip_lm_prefix(g.template)
            out.setdefault(key, TensorInfo(g.first_name, g.dtype, g.first_shape, (0, g.nbytes), g.first_file))
    return out


_LAYER_TEMPLATE = re.compile(r"(?:^|\.)(?:layers|h|blocks|layer|block)\.\{\}\.")


def _in_layer(template: str) -> bool:
    return _LAYER_TEMPLATE.search(template) is not None


def _shape_of(lm: dict[str, TensorInfo] | None, *needles: str) -> tuple[int, ...] | None:
    if not lm:
        return None
    for name, t in lm.items():
        if all(n in name for n in needles):
            return t.shape
    return None


def _dims(cv: ConfigView, mla: bool, lm: dict[str, TensorInfo] | None) -> Dims:
    hidden = cv.int("hidden_size", "n_embd", "d_model", "dim", "model_dim", "hidden_dim", default=0) or 0
    n_layers = cv.int("num_hidden_layers", "n_layer", "num_layers", "n_layers", default=0) or 0
    if not n_layers:  # Nemotron-H derives the layer count from its per-layer type list
        types = cv.get("layers_block_type", "layer_types", "hybrid_override_pattern")
        n_layers = len(types) if isinstance(types, (list, str)) else 0
    heads = cv.int("num_attention_heads", "n_head", "n_heads", "num_heads", "attention_heads", default=0) or 0
    attn_config = cv.get("attn_config") if isinstance(cv.get("attn_config"), dict) else {}
    ffn_config = cv.get("ffn_config") if isinstance(cv.get("ffn_config"), dict) else {}
    kv = cv.int("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num", "n_kv_heads")
    if kv is None and attn_config.get("kv_n_heads"):
        kv = int(attn_config["kv_n_heads"])
    if cv.model_type == "falcon" and not cv.bool("new_decoder_architecture"):
        kv = 1 if cv.bool("multi_query", default=True) else heads
    elif kv is None and cv.bool("multi_query"):
        kv = 1
    kv = kv or heads
    if mla:
        cv.mark_used("q_lora_rank", "kv_lora_rank", "head_dim", "qk_head_dim")
        nope = cv.int("qk_nope_head_dim", default=0) or 0
        rope_dim = cv.int("qk_rope_head_dim", default=0) or 0
        head_dim = nope + rope_dim
        v_head_dim = cv.int("v_head_dim", default=head_dim)
    else:
        head_dim = cv.int("head_dim", "attention_head_dim", "kv_channels", "head_size", "d_head", default=0) or 0
        if not head_dim and heads:
            head_dim = hidden // heads
        v_head_dim = None
    inter = cv.int("intermediate_size", "n_inner", "ffn_hidden_size", "ffn_dim", "inner_hidden_size", "d_ff")
    if inter is None and ffn_config.get("ffn_hidden_size"):
        inter = int(ffn_config["ffn_hidden_size"])
    if inter is None and cv.model_type in ("gpt2", "gpt_bigcode", "gpt_neo", "gptj", "codegen", "falcon") and hidden:
        inter = 4 * hidden
    vocab = cv.int("vocab_size", "padded_vocab_size", "n_vocab", default=0) or 0
    rows = _shape_of(lm, "embed_tokens.weight") or _shape_of(lm, "wte.weight") or _shape_of(lm, "word_embeddings.weight")
    if rows is None:
        rows = _shape_of(lm, "embed_in.weight") or _shape_of(lm, "tok_embeddings.weight")
    if rows:
        vocab = rows[0]
    max_pos = cv.int("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length",
                     "max_seq_len", "n_ctx", "model_max_length")  # fmt: skip
    _check_plausible(hidden=hidden, num_hidden_layers=n_layers, num_attention_heads=heads, num_key_value_heads=kv,
                     head_dim=head_dim, vocab_size=vocab)  # fmt: skip
    return Dims(hidden, n_layers, heads, kv, head_dim, inter if isinstance(inter, int) and inter >= 0 else None, vocab,
                max_pos if isinstance(max_pos, int) and max_pos > 0 else None, v_head_dim)  # fmt: skip


# Generous upper bounds: a config beyond them is corrupt, and building per-layer plans for it would exhaust memory.
_LIMITS = {"hidden": 1 << 20, "num_hidden_layers": 10_000, "num_attention_heads": 1 << 14, "num_key_value_heads": 1 << 14,
           "head_dim": 1 << 14, "vocab_size": 1 << 26}  # fmt: skip


def _check_plausible(**values: int) -> None:
    for name, value in values.items():
        if value < 0 or value > _LIMITS[name]:
            raise ConfigError(f"config.json: {name}={value} is not a plausible value (0..{_LIMITS[name]})",
                              "the config is corrupt or not a transformers config; fix the field")  # fmt: skip


def _moe(cv: ConfigView, lm: dict[str, TensorInfo] | None) -> Moe | None:
    ffn_config = cv.get("ffn_config") if isinstance(cv.get("ffn_config"), dict) else {}
    experts = cv.int("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts", "num_routed_experts")
    experts = experts or ffn_config.get("moe_num_experts")
    top_k = cv.int("num_experts_per_tok", "moe_k", "experts_per_token", "moe_top_k", "num_selected_experts", "moe_topk",
                   "num_experts_per_token", "top_k_experts")  # fmt: skip
    top_k = top_k or ffn_config.get("moe_top_k")
    if isinstance(experts, list) and experts:  # ernie-style per-modality list
        experts = experts[0]
    if not isinstance(experts, int) or experts <= 1:
        return None
    if not isinstance(top_k, int) or top_k < 1:
        top_k = 1
    shared = cv.int("n_shared_experts", "num_shared_experts", "moe_num_shared_experts", "shared_expert_count", default=0)
    shared_size = cv.int("shared_expert_intermediate_size", "moe_shared_expert_intermediate_size")
    if not shared and shared_size:
        shared = 1
    if not shared and lm and any("shared_expert" in n for n in lm):
        shared = 1
    scoring = str(cv.get("scoring_func", "router_scoring_func", default="") or "")
    if not scoring:
        scoring = "sigmoid" if cv.model_type in SIGMOID_ROUTER_TYPES else "softmax"
    correction = bool(cv.get("topk_method") == "noaux_tc") or (lm is not None and any(
        "e_score_correction_bias" in n or n.endswith("expert_bias") or "moe_statics" in n for n in lm))  # fmt: skip
    norm_topk = cv.get("norm_topk_prob")
    return Moe(
        num_experts=int(experts),
        top_k=int(top_k or 1),
        expert_intermediate_size=cv.int("moe_intermediate_size", "expert_intermediate_size", "intermediate_size"),
        num_shared_experts=int(shared or 0),
        shared_expert_intermediate_size=shared_size,
        scoring=scoring,
        correction_bias=correction,
        norm_topk_prob=bool(norm_topk) if norm_topk is not None else None,
        routed_scaling_factor=cv.float("routed_scaling_factor"),
        n_group=cv.int("n_group"),
        topk_group=cv.int("topk_group"),
    )


def _moe_layers_from_config(cv: ConfigView, n: int) -> dict[int, bool]:
    first_dense = cv.int("first_k_dense_replace", "moe_layer_start_index", "num_dense_layers", default=0) or 0
    freq = cv.int("moe_layer_freq", "decoder_sparse_step", "interleave_moe_layer_step", "moe_layer_interval", default=1)
    only_dense = cv.get("mlp_only_layers") or []
    period = cv.int("expert_layer_period")
    offset = cv.int("expert_layer_offset", default=0) or 0
    out = {}
    for i in range(n):
        if period:
            out[i] = i % period == offset
        else:
            out[i] = i >= first_dense and (freq or 1) > 0 and (i - first_dense) % (freq or 1) == 0 and i not in only_dense
    mlp_types = cv.get("mlp_layer_types")
    if isinstance(mlp_types, list) and len(mlp_types) >= n:
        out = {i: str(mlp_types[i]).lower() in ("sparse", "moe", "hash_moe") for i in range(n)}
    return out


_K_PROJ = re.compile(r"\.(k_proj|key|Wk|k)\.weight$")
_V_PROJ = re.compile(r"\.(v_proj|value|Wv|v)\.weight$")


def _with_kv_widths(layers: tuple[LayerInfo, ...], index: TensorIndex) -> tuple[LayerInfo, ...]:
    """Per-layer K+V widths from the separate k/v projections (rows = heads × head_dim of that layer)."""
    attention_groups = [g for g in index.groups if tn.tower_of(g.template) is None and _in_layer(g.template)
                        and tn.layer_role(tn.strip_lm_prefix(g.template)) == "attention"
                        and (_K_PROJ.search(g.template) or _V_PROJ.search(g.template))]  # fmt: skip
    k_rows: dict[int, int] = {}
    v_rows: dict[int, int] = {}
    for name, shape in index.shapes_of(attention_groups):
        idx = tn.layer_index(name)
        if idx is None or len(shape) != 2 or "indexer" in name:
            continue
        (k_rows if _K_PROJ.search(name) else v_rows)[idx] = shape[0]
    out = []
    for layer in layers:
        width = None
        if layer.attention in ("full", "sliding", "chunked") and layer.index in k_rows:
            # No v projection: values are the keys (Gemma 4 global layers), cached twice by the engines.
            width = k_rows[layer.index] + v_rows.get(layer.index, k_rows[layer.index])
        out.append(replace(layer, kv_width=width) if width else layer)
    return tuple(out)


def _per_layer_tensors(index: TensorIndex, n: int) -> tuple[dict[int, set[str]], dict[int, bool]]:
    """Mixer roles and MoE-ness per decoder layer, from the names of the (small) per-layer groups.

    Expert groups are skipped: each MoE layer also has a router, which is enough to mark it.
    """
    wanted = []
    for g in index.groups:
        tmpl = tn.strip_lm_prefix(g.template)
        if tn.tower_of(g.template) or not _in_layer(tmpl) or tn.component_of_template(tmpl) == "experts":
            continue
        if tn.layer_role(tmpl) or tn.component_of_template(tmpl) in ("mlp", "router", "shared_experts"):
            wanted.append(g)
    roles: dict[int, set[str]] = defaultdict(set)
    moe_layers: dict[int, bool] = {}
    for name in index.names_of(wanted):
        idx = tn.layer_index(name)
        if idx is None or idx >= n:
            continue
        tmpl = tn.template(tn.strip_lm_prefix(name))
        role, comp = tn.layer_role(tmpl), tn.component_of_template(tmpl)
        if role:
            roles[idx].add(role)
        if comp in ("router", "shared_experts"):
            moe_layers[idx] = moe_layers.get(idx, False) or comp == "router"
        elif comp == "mlp":
            moe_layers.setdefault(idx, False)
    if not any(moe_layers.values()) and any(tn.component_of_template(g.template) == "experts" for g in index.groups):
        # Experts without a recognised router: fall back to the experts' own layer indices.
        experts = [g for g in index.groups if tn.component_of_template(g.template) == "experts"]
        for name in index.names_of(experts):
            idx = tn.layer_index(name)
            if idx is not None and idx < n:
                moe_layers[idx] = True
    for i in range(n):
        roles.setdefault(i, set())
    return dict(roles), moe_layers


def _rope(cv: ConfigView, lm: dict[str, TensorInfo] | None) -> tuple[Rope | None, str]:
    mt = cv.model_type
    attn_config = cv.get("attn_config") if isinstance(cv.get("attn_config"), dict) else {}
    if cv.bool("alibi") or attn_config.get("alibi") or mt in ("bloom", "mpt") and not attn_config.get("rope"):
        return None, "alibi"
    if mt in ("mamba", "mamba2", "falcon_mamba", "rwkv"):
        return None, "none"
    if cv.get("position_embedding_type") in ("absolute", "learned") or mt in ("gpt2", "gpt_bigcode", "opt", "gpt_neo",
                                                                                "biogpt", "xglm"):  # fmt: skip
        return None, "absolute"
    if lm is not None and any(n.endswith(("wpe.weight", "embed_positions.weight")) for n in lm):
        return None, "absolute"
    params = cv.get("rope_parameters")
    scaling = cv.get("rope_scaling")
    local_theta = cv.float("rope_local_base_freq")
    main: dict = {}
    if isinstance(params, dict) and params:
        if all(isinstance(v, dict) for v in params.values()):  # per layer type (Gemma 3 in transformers 5)
            main = dict(params.get("full_attention") or next(iter(params.values())))
            local = params.get("sliding_attention")
            if isinstance(local, dict) and local.get("rope_theta") is not None:
                local_theta = float(local["rope_theta"])
        else:
            main = dict(params)
    if isinstance(scaling, dict) and scaling:
        main = {**scaling, **main}
    theta = main.pop("rope_theta", None)
    if not isinstance(theta, (int, float)) or isinstance(theta, bool):
        theta = None
    if theta is None:
        theta = cv.float("rope_theta", "rotary_emb_base", "rope_base", "rotary_base", default=None)
    if theta is None and attn_config.get("rope_theta"):
        theta = attn_config["rope_theta"]
    rope_type = str(main.pop("rope_type", None) or main.pop("type", None) or "default")
    main.pop("type", None)
    rope_type = {"su": "longrope", "mrope": "default"}.get(rope_type, rope_type)
    partial = main.pop("partial_rotary_factor", None)
    if partial is None:
        partial = cv.float("partial_rotary_factor", "rotary_pct", default=1.0)
    rotary_dim = cv.int("rotary_dim", "rotary_emb_dim")
    if theta is None and rope_type == "default" and rotary_dim is None and mt not in _ROPE_BY_DEFAULT:
        # No rope key at all: trust the model type table rather than guessing.
        return None, "none" if lm is None else "unknown"
    original = main.get("original_max_position_embeddings") or cv.int("original_max_position_embeddings")
    return (
        Rope(
            type=rope_type,
            theta=float(theta) if theta is not None else 10000.0,
            scaling={k: v for k, v in main.items() if k != "original_max_position_embeddings"},
            partial_rotary_factor=float(partial),
            rotary_dim=rotary_dim,
            original_max_position_embeddings=int(original) if original else None,
            local_theta=local_theta,
        ),
        "rope",
    )


# Families that use RoPE even when their config carries no rope key (defaults live in the modelling code).
_ROPE_BY_DEFAULT = {"llama", "mistral", "mixtral", "qwen2", "qwen3", "gemma", "phi3", "falcon", "gpt_neox", "gptj",
                    "codegen", "persimmon", "stablelm", "phi", "deepseek_v2", "deepseek_v3", "cohere", "olmo"}  # fmt: skip


def _norms(cv: ConfigView, lm: dict[str, TensorInfo] | None, dims: Dims) -> Norms:
    mt = cv.model_type
    rms_eps = cv.float("rms_norm_eps", "rms_norm_epsilon")
    ln_eps = cv.float("layer_norm_epsilon", "layer_norm_eps", "layernorm_epsilon", "norm_epsilon", "norm_eps")
    kind = "rms" if rms_eps is not None or mt in RMS_NORM_TYPES else ("layernorm" if ln_eps is not None else "rms")
    if lm is not None:
        norm_biases = [n for n in lm if tn.component(n) == "norms" and n.endswith(".bias")]
        if norm_biases and mt not in RMS_NORM_TYPES:
            kind = "layernorm"
    eps = rms_eps if rms_eps is not None else ln_eps
    qk = None
    shape = _shape_of(lm, "q_norm.weight") or _shape_of(lm, "q_layernorm.weight") or _shape_of(lm, "query_layernorm")
    if shape:
        qk = "per_head" if shape[-1] == dims.head_dim and dims.head_dim != dims.hidden_size else "full"
        if len(shape) == 2:  # cohere: (heads, head_dim)
            qk = "per_head"
    elif lm is None and cv.bool("use_qk_norm", "qk_layernorm", "qk_norm", "use_qk_layernorm"):
        qk = "per_head"
    elif lm is None and mt in ("qwen3", "qwen3_moe", "qwen3_next", "gemma3", "gemma3_text", "olmo2", "olmoe",
                               "glm4_moe", "exaone4", "smollm3_qk", "hunyuan_v1_moe", "hunyuan_v1_dense", "seed_oss_qk"):  # fmt: skip
        qk = "full" if mt in ("olmo2", "olmoe") else "per_head"
    placement = "pre"
    if lm is not None:
        names = " ".join(n for n in lm if _in_layer(n))
        if "pre_feedforward_layernorm" in names and "post_feedforward_layernorm" in names:
            placement = "sandwich"
        elif "post_feedforward_layernorm" in names and "input_layernorm" not in names:
            placement = "post"
    elif mt in ("gemma2", "gemma3", "gemma3_text"):
        placement = "sandwich"
    elif mt in ("olmo2", "olmo3"):
        placement = "post"
    offset = 1.0 if mt in NORM_OFFSET_TYPES else 0.0
    return Norms(kind=kind, eps=eps, offset=offset, qk_norm=qk, placement=placement)


def _activation(cv: ConfigView) -> str | None:
    act = cv.get("hidden_act", "hidden_activation", "activation_function", "activation", "act_fn", "mlp_activation")
    ffn_config = cv.get("ffn_config") if isinstance(cv.get("ffn_config"), dict) else {}
    if act is None and isinstance(ffn_config.get("ffn_act_fn"), dict):
        act = ffn_config["ffn_act_fn"].get("name")
    return str(act) if act is not None else None


def _gated(cv: ConfigView, lm: dict[str, TensorInfo] | None) -> bool | None:
    if lm is None:
        return None
    names = [n for n in lm if _in_layer(n)]
    gated_keys = ("gate_proj", "gate_up_proj", ".w3.", "w1.weight", "dense_h_to_4h_gate", "up_gate_proj", ".wi_0")
    return any(k in n for n in names for k in gated_keys if tn.component(n) in ("mlp", "experts", "shared_experts"))


def _biases(cv: ConfigView, lm: dict[str, TensorInfo] | None) -> Biases:
    if lm is None:
        b = cv.bool("attention_bias", "qkv_bias", "bias", "use_bias", "add_bias_linear")
        return Biases(attention_qkv=b, attention_out=cv.bool("attention_bias", "bias", "use_bias"),
                      mlp=cv.bool("mlp_bias", "bias", "use_bias"))  # fmt: skip
    layer0 = [n for n in lm if _in_layer(n) and n.endswith(".bias")]
    qkv = any(k in n for n in layer0 for k in ("q_proj", "k_proj", "v_proj", "qkv", "query_key_value", "c_attn", "Wqkv"))
    out = any(k in n for n in layer0 for k in ("o_proj", "attn.c_proj", "attention.dense", "out_proj", "self_attention.dense", "attn.dense"))  # fmt: skip
    mlp = any(tn.component(n) in ("mlp", "experts", "shared_experts") for n in layer0)
    head = any(n.endswith(("lm_head.bias", "embed_out.bias")) for n in lm)
    cv.mark_used("attention_bias", "mlp_bias", "qkv_bias", "bias", "use_bias")
    return Biases(qkv, out, mlp, head)


def _multipliers(cv: ConfigView, dims: Dims) -> Multipliers:
    logit_scale = cv.float("logit_scale", "lm_head_multiplier", "output_multiplier")
    scaling = cv.float("logits_scaling")
    if scaling and scaling != 1.0:
        logit_scale = 1.0 / scaling
    embed = cv.float("embedding_multiplier", "emb_scale", "scale_emb", "embeddings_multiplier")
    if embed is None and cv.model_type in SQRT_EMBED_SCALE_TYPES and dims.hidden_size:
        embed = math.sqrt(dims.hidden_size)
    return Multipliers(
        logit_scale=logit_scale,
        embedding_multiplier=embed,
        residual_multiplier=cv.float("residual_multiplier", "scale_depth"),
        attention_multiplier=cv.float("attention_multiplier", "attn_scale"),
        query_pre_attn_scalar=cv.float("query_pre_attn_scalar"),
        attn_logit_softcapping=cv.float("attn_logit_softcapping", "attn_softcap", "attention_logit_softcapping"),
        final_logit_softcapping=cv.float("final_logit_softcapping", "final_softcap", "logit_softcapping"),
    )


def _tied(cv: ConfigView, lm: dict[str, TensorInfo] | None) -> bool:
    value = cv.get("tie_word_embeddings", "tie_embeddings", "share_embeddings")
    if value is None and isinstance(cv.raw.get("tie_word_embeddings"), bool):
        value = cv.raw["tie_word_embeddings"]
    if value is None:  # transformers' default is True when the key is absent
        return True if lm is None else not any(tn.component(n) == "head" for n in lm)
    return bool(value)


def _sinks(cv: ConfigView, lm: dict[str, TensorInfo] | None) -> bool:
    if lm is not None:
        return any(n.endswith((".sinks", ".attention_sink", ".sink", "attn_sinks")) for n in lm)
    return cv.model_type == "gpt_oss" or cv.bool("use_attention_sinks", "attention_sinks")


def _mtp(cv: ConfigView, index: TensorIndex | None, n_layers: int) -> int:
    """MTP layers: declared in config (DeepSeek appends them as layers ≥ num_hidden_layers) or named `mtp`."""
    declared = cv.int("num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_modules", "n_mtp_layers",
                      "nextn_predict_layers", default=0) or 0  # fmt: skip
    if index is None:
        return declared
    mtp_groups = [g for g in index.groups if g.template.startswith("mtp.") or ".mtp." in g.template]
    if mtp_groups:
        return len({tn.layer_index(n) for n in index.names_of(mtp_groups)})
    if not declared:
        return 0
    norms = [g for g in index.groups if _in_layer(g.template) and tn.component_of_template(g.template) == "norms"]
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
    ignored = qc.get("modules_to_not_convert") or qc.get("ignore") or qc.get("ignored_layers") or ()
    return Quantization(
        method=method,
        fmt=str(fmt) if fmt else None,
        block_size=tuple(int(b) for b in block) if isinstance(block, list) else None,
        scale_tensors=tuple(sorted(scale_suffixes)),
        ignored_modules=tuple(str(m) for m in ignored) if isinstance(ignored, list) else (),
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
