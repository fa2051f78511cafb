"""Per-layer plan: each decoder layer's mixer (full / sliding / chunked / MLA / linear / SSM / conv / none), window,
dense or MoE MLP, RoPE and K/V width. Sources, strongest first: the layer's tensors, `layer_types`, the family's
pattern keys, then the defaults transformers applies when an older config omits `layer_types`.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence

from msgspec.structs import replace

from onboard.findings import Finding, info, warning
from onboard.inspect_checkpoint import tensor_names as tn
from onboard.inspect_checkpoint.config_view import ConfigView
from onboard.inspect_checkpoint.tensor_index import TensorIndex
from onboard.names.config import spellings
from onboard.names.tensors import LAYER_INDEX
from onboard.profile import LayerInfo

# `layer_types` spellings → our vocabulary.
LAYER_TYPE_NAMES = {
    "full_attention": "full", "attention": "full", "global": "full", "global_attention": "full", "full": "full",
    "sliding_attention": "sliding", "hybrid_sliding": "sliding", "local": "sliding", "sliding": "sliding", "local_attention": "sliding",
    "chunked_attention": "chunked",
    "linear_attention": "linear", "linear": "linear", "gated_deltanet": "linear", "kda": "linear",
    "mamba": "ssm", "mamba2": "ssm", "ssm": "ssm",
    # RecurrentGemma's RG-LRU blocks: transformers reads "recurrent" as linear_attention (a state vector and a
    # conv window, memory._linear_state), not a Mamba selective state.
    "recurrent": "linear", "rg_lru": "linear",
    "conv": "conv", "short_conv": "conv",
    "indexed_attention": "full",  # full attention plus a sparse indexer; MLA when the layers are MLA (below)
    "hybrid": "hybrid",  # Zamba / Zamba2: a Mamba block plus the shared attention block (see plan_layers)
    "moe": "none", "mlp": "none",  # Nemotron-H: MLP-only layers without a token mixer
}  # fmt: skip

# Families whose older configs leave `layer_types` out: transformers' default pattern for each.
_EVERY_SECOND_SLIDING = ("gemma2", "gpt_oss", "vaultgemma", "t5gemma")
# Families whose saved `layer_types` call their Mamba mixers "linear_attention": read as Mamba.
_MAMBA_AS_LINEAR_ATTENTION = ("nemotron_h", "granitemoehybrid", "zamba", "zamba2")
# Families whose config class derives "hybrid" on every layer without saving it (Falcon-H1: Mamba-2 beside attention).
_ALL_HYBRID = ("falcon_h1",)
_PATTERN_KEY_FAMILIES = ("gemma3", "gemma3_text", "cohere2", "exaone4", "gemma4_text", "gemma4")
# Gemma4TextConfig forces its last layer to full attention, and builds a missing `layer_types` with its own 5:1
# pattern (a saved `sliding_window_pattern` is not read).
_LAST_LAYER_FULL = ("gemma4_text", "gemma4")
_ALL_SLIDING_IF_WINDOW = ("mistral", "mixtral", "starcoder2", "phi3", "phimoe", "minimax", "mistral3")
# Families whose layers other than the sliding ones skip RoPE when the model has a window.
_NOPE_UNLESS_SLIDING = ("kolibri1", "kolibri1_1", "lara_mini")
_WINDOW_AFTER_MAX_LAYERS = ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "dots1", "smollm3", "qwen2_vl", "qwen2_5_vl")


def _declared_window(cv: ConfigView) -> int | None:
    w = cv.int(*spellings("sliding_window"))
    local = cv.int("local_attention")  # ModernBERT-decoder: its config class sets sliding_window = local_attention // 2
    if w is None and local:
        w = local // 2
    return w if w and w > 0 else None


def _idle_window(cv: ConfigView) -> tuple[int, int] | None:
    """(window, context) when the declared window is at least the context, so it never binds (Phi-3-mini-128k)."""
    window, context = _declared_window(cv), cv.int(*spellings("max_position_embeddings"))
    return (window, context) if window and context and window >= context else None


def _window(cv: ConfigView) -> int | None:
    """The sliding window that binds within the model's context; None without one."""
    return None if _idle_window(cv) else _declared_window(cv)


def _last_layer_full(model_type: str, kinds: list[str]) -> list[str]:
    if model_type in _LAST_LAYER_FULL and kinds and kinds[-1] == "sliding":
        return [*kinds[:-1], "full"]
    return kinds


def shared_kv_sources(layer_types: Sequence[str], num_shared: int) -> dict[int, int | None]:
    """Each of the last `num_shared` layers -> the last earlier layer of its type, whose keys and values it attends
    over (None: none), as transformers' Gemma 3n / 4 `kv_sharing_modes`; generated adapters read it too."""
    if num_shared <= 0:
        return {}
    n = len(layer_types)
    first = max(n - num_shared, 0)
    return {
        i: max((j for j in range(first) if layer_types[j] == layer_types[i]), default=None) for i in range(first, n)
    }


def class_layer_types(cv: ConfigView) -> list | None:
    """`layer_types` as the config class keeps it (Gemma 4's last layer forced to full attention), or None."""
    types = cv.get("layer_types")
    if not isinstance(types, list) or not types:
        return None
    return [*types[:-1], "full_attention"] if cv.model_type in _LAST_LAYER_FULL else types


def _config_kinds(cv: ConfigView, n: int, mla: bool) -> list[str]:
    mt = cv.model_type
    window = _window(cv)
    cv.mark_used("no_rope_layer_interval", "no_rope_layers")
    types = cv.get(*spellings("layer_types"))
    if isinstance(types, list) and types:
        kinds = [LAYER_TYPE_NAMES.get(str(t).lower(), f"unknown:{t}") for t in types]
        if mt in _MAMBA_AS_LINEAR_ATTENTION:
            kinds = ["ssm" if k == "linear" else k for k in kinds]
        if _idle_window(cv):  # "sliding" layers whose window never binds attend like full ones
            kinds = ["mla" if k == "sliding" and mla else "full" if k == "sliding" else k for k in kinds]
        if mt == "recurrent_gemma":  # its attention blocks are local (attention_window_size)
            kinds = ["sliding" if k == "full" else k for k in kinds]
        if len(kinds) < n:  # recurrent_gemma-style repeating block pattern
            kinds = [kinds[i % len(kinds)] for i in range(n)]
        kinds = _last_layer_full(mt, kinds[:n])
        return ["mla" if mla and k == "full" else k for k in kinds]
    pattern = cv.get("hybrid_override_pattern")
    if isinstance(pattern, str) and pattern:
        table = {"M": "ssm", "*": "full", "-": "none", "E": "none"}
        return [table.get(ch, f"unknown:{ch}") for ch in pattern[:n]]
    period = cv.period("attn_layer_period")
    if period:
        offset = cv.int("attn_layer_offset", default=0) or 0
        return ["full" if i % period == offset else "ssm" for i in range(n)]
    indices = cv.get("attn_layer_indices")
    if isinstance(indices, list) or cv.has("attn_layer_indices"):  # Bamba: null means no attention layer at all
        return ["full" if i in (indices or ()) else "ssm" for i in range(n)]
    interval = cv.period("full_attention_interval")
    if interval and mt.startswith(("qwen3_next", "qwen3_5")):
        return ["full" if (i + 1) % interval == 0 else "linear" for i in range(n)]
    if mt in _ALL_HYBRID:
        return ["hybrid"] * n
    every = cv.period("global_attn_every_n_layers")  # AFMoE without layer_types: every n-th layer full, others sliding
    if every and window:
        return ["sliding" if (i + 1) % every else "full" for i in range(n)]
    if mt in ("mamba", "mamba2", "falcon_mamba"):
        return ["ssm"] * n
    if mt == "rwkv":  # its mixer is named `attention` but is a linear recurrence with a fixed state
        return ["linear"] * n
    base = "mla" if mla else "full"
    if mt in _EVERY_SECOND_SLIDING and window:
        return ["sliding" if (i + 1) % 2 else "full" for i in range(n)]
    if mt in _PATTERN_KEY_FAMILIES and window:
        default = 6 if mt.startswith("gemma") else 4
        every = (
            default
            if mt in _LAST_LAYER_FULL
            else cv.period("sliding_window_pattern", "_sliding_window_pattern", default=default)
        )
        return _last_layer_full(mt, ["sliding" if (i + 1) % every else "full" for i in range(n)])
    if mt in _WINDOW_AFTER_MAX_LAYERS:
        if window and cv.bool("use_sliding_window"):
            start = cv.int("max_window_layers", default=0) or 0
            return ["sliding" if i >= start else "full" for i in range(n)]
        cv.mark_used("use_sliding_window", "max_window_layers")
        return [base] * n
    if mt in _ALL_SLIDING_IF_WINDOW and window:
        return ["sliding"] * n
    attention_types = cv.get("attention_types")  # gpt_neo: [[["global", "local"], 12]]
    if isinstance(attention_types, list) and attention_types:
        expanded: list[str] = []
        for group in attention_types:
            if isinstance(group, list) and len(group) == 2 and isinstance(group[0], list) and isinstance(group[1], int):
                expanded += [LAYER_TYPE_NAMES.get(str(t), "full") for t in group[0]] * group[1]
        return (expanded + [base] * n)[:n]
    chunk = cv.int("attention_chunk_size")
    if chunk and mt.startswith("llama4"):
        nope = cv.get("no_rope_layers")
        if isinstance(nope, list) and len(nope) >= n:
            return ["chunked" if nope[i] else "full" for i in range(n)]
    if window and not mla and _unregistered(mt):
        return _day_zero_window(cv, n, base)
    return [base] * n


def _unregistered(model_type: str) -> bool:
    """A model_type the family catalog lacks: a day-zero architecture."""
    from .families import known_model_types

    return model_type not in known_model_types()


def _day_zero_window(cv: ConfigView, n: int, base: str) -> list[str]:
    """A window on an unregistered architecture without layer_types: Qwen2's convention when `use_sliding_window`
    is present (from `max_window_layers` on, if true), else Mistral's (every layer). Parity confirms or refutes it."""
    if cv.has("use_sliding_window"):
        if not cv.bool("use_sliding_window"):
            return [base] * n
        start = cv.int("max_window_layers", default=0) or 0
        return ["sliding" if i >= start else base for i in range(n)]
    return ["sliding"] * n


def _rope_layers(cv: ConfigView, n: int, kinds: list[str]) -> list[bool]:
    """False where a layer skips RoPE (NoPE): `no_rope_layers` holds 1 for layers that DO use rope."""
    flags = cv.get("no_rope_layers")
    if isinstance(flags, list) and len(flags) >= n:
        return [bool(flags[i]) for i in range(n)]
    interval = cv.period("no_rope_layer_interval")
    if interval:
        return [(i + 1) % interval != 0 for i in range(n)]
    # RoPE parameters per layer type, None for a type without RoPE (Ergo's and Cohere Compass's global layers).
    params, types = cv.get("rope_parameters"), cv.get("layer_types")
    if isinstance(params, dict) and isinstance(types, list) and len(types) >= n and None in params.values():
        if all(v is None or isinstance(v, dict) for v in params.values()):
            return [params.get(str(types[i])) is not None for i in range(n)]
    if cv.model_type in _NOPE_UNLESS_SLIDING and "sliding" in kinds:
        return [kind == "sliding" for kind in kinds]
    return [True] * n


def _window_for(kind: str, cv: ConfigView) -> int | None:
    if kind == "sliding":
        return _window(cv)
    if kind == "chunked":
        return cv.int("attention_chunk_size")
    return None


def plan_layers(
    cv: ConfigView, n: int, mla: bool, roles: dict[int, set[str]] | None, moe_layers: dict[int, bool] | None
) -> tuple[tuple[LayerInfo, ...], list[Finding]]:
    """Build the per-layer plan; `roles` are the mixer kinds seen in each layer's tensors (None without headers)."""
    findings: list[Finding] = []
    kinds = _config_kinds(cv, n, mla)
    if _window(cv) and not isinstance(cv.get("layer_types"), list) and _unregistered(cv.model_type):
        where = "every layer" if all(k == "sliding" for k in kinds) else f"{kinds.count('sliding')} of {n} layers"
        findings.append(
            warning(
                "window-layers-assumed",
                f"sliding_window {_window(cv)} without layer_types on the unregistered model_type "
                f"{cv.model_type!r}: assumed on {where} (transformers' {'Qwen2' if cv.has('use_sliding_window') else 'Mistral'}"
                " convention)",
                "parity against the repository's code confirms it; add layer_types to config.json if not",
            )
        )
    idle = _idle_window(cv)
    if idle:
        findings.append(
            info(
                "window-never-binds",
                f"sliding_window {idle[0]} >= max_position_embeddings {idle[1]}: no position can fall "
                "outside the window, so its layers are planned as full attention (the KV cache grows with the sequence)",
            )
        )
    rope_flags = _rope_layers(cv, n, kinds)
    layers: list[LayerInfo] = []
    for i, kind in enumerate(kinds):
        seen = roles.get(i, set()) if roles is not None else None
        declared = kind
        parallel_ssm = False
        if kind == "hybrid":
            # Zamba: Mamba plus one shared attention block stored once, so most hybrid layers' tensors show only the
            # Mamba half; each still caches its own K and V. ZAYA's "hybrid" layers have no Mamba at all.
            mamba = "ssm" in seen if seen is not None else any(k.startswith("mamba") for _, k in cv.all_keys())
            kind, parallel_ssm = "full", mamba
        elif seen is not None:
            kind, parallel_ssm, note = _reconcile(kind, seen)
            if note:
                findings.append(
                    warning(
                        "layer-kind-mismatch",
                        f"layer {i}: {note}",
                        "check layer_types / the hybrid pattern in config.json against the tensors",
                    )
                )
        if kind.startswith("unknown:"):
            findings.append(
                warning(
                    "unknown-layer-type",
                    f"layer {i} has layer type {kind[8:]!r}, which onboard does not know",
                    "add its meaning to LAYER_TYPE_NAMES in layer_plan.py",
                )
            )
        mlp = "dense"
        if moe_layers is not None:
            mlp = "moe" if moe_layers.get(i) else ("dense" if i in moe_layers else "none")
        if mla and declared == "sliding" and kind in ("sliding", "mla"):  # latent attention on a window (dots.llm3)
            kind = "mla"
        window = _window(cv) if kind == "mla" and declared == "sliding" else _window_for(kind, cv)
        layers.append(
            LayerInfo(
                i, kind, window, mlp, rope_flags[i] and kind in ("full", "sliding", "chunked", "mla"), parallel_ssm
            )
        )
    return tuple(layers), findings


def _reconcile(kind: str, seen: set[str]) -> tuple[str, bool, str | None]:
    """Combine the config's kind with the mixers the tensors show. Tensors win; a disagreement is reported."""
    attention_like = {"full", "sliding", "chunked", "mla"}
    if "mla" in seen:
        return "mla", "ssm" in seen, None if kind in attention_like else f"config says {kind}, tensors show MLA"
    if "attention" in seen:
        parallel = bool(seen & {"ssm", "linear"})
        if kind in attention_like:
            return kind, parallel, None
        if kind in ("ssm", "linear") and parallel:  # hybrid layer declared by its recurrent half
            return "full", True, None
        if kind in ("linear", "ssm"):
            # Linear-attention mixers are often named `attention` / `self_attn` (Kimi-Linear, MiniMax, Bailing, RWKV).
            return kind, False, None
        return "full", parallel, f"config says {kind}, tensors show attention"
    for role in ("linear", "ssm", "conv"):
        if role in seen:
            if kind in attention_like and not kind.startswith("unknown"):
                return role, False, f"config says {kind}, tensors show {role}"
            return role, False, None
    if not seen:
        return "none", False, None if kind in ("none",) or kind in attention_like else None
    return kind, False, None


_K_PROJ = re.compile(r"\.(k_proj|key|Wk|k)\.weight$")
_V_PROJ = re.compile(r"\.(v_proj|value|Wv|v)\.weight$")
# MLA's down-projection to the cached latent: rows = kv_lora_rank + qk_rope_head_dim, one per attention module.
_MLA_LATENT = re.compile(r"\.kv_a_proj_with_mqa\.weight$")


def with_kv_widths(layers: tuple[LayerInfo, ...], index: TensorIndex) -> tuple[LayerInfo, ...]:
    """Per-layer K+V widths from the k/v projections' rows; for MLA layers the latent width, summed over the layer's
    attention modules (LongCat-Flash has two)."""
    attention_groups = [
        g
        for g in index.groups
        if tn.tower_of(g.template) is None
        and tn.in_layer(g.template)
        and tn.layer_role(tn.strip_lm_prefix(g.template)) == "attention"
        and (_K_PROJ.search(g.template) or _V_PROJ.search(g.template))
    ]
    k_rows: dict[int, int] = {}
    v_rows: dict[int, int] = {}
    for name, shape in index.shapes_of(attention_groups):
        idx = tn.layer_index(name)
        if idx is None or len(shape) != 2 or "indexer" in name:
            continue
        (k_rows if _K_PROJ.search(name) else v_rows)[idx] = shape[0]
    latent: dict[int, int] = defaultdict(int)
    mla_groups = [g for g in index.groups if tn.tower_of(g.template) is None and _MLA_LATENT.search(g.template)]
    for name, shape in index.shapes_of(mla_groups):
        idx = tn.layer_index(name)
        if idx is not None and len(shape) == 2:
            latent[idx] += shape[0]
    out = []
    for layer in layers:
        width = None
        if layer.attention == "mla" and layer.index in latent:
            width = latent[layer.index]
        elif layer.attention in ("full", "sliding", "chunked") and layer.index in k_rows:
            # No v projection: values are the keys (Gemma 4 global layers), cached twice by the engines.
            width = k_rows[layer.index] + v_rows.get(layer.index, k_rows[layer.index])
        out.append(replace(layer, kv_width=width) if width else layer)
    return tuple(out)


def with_norm_names(layers: tuple[LayerInfo, ...], index: TensorIndex) -> tuple[LayerInfo, ...]:
    """Each layer's stored norms (module names), recorded only when the layers differ in them."""
    norm_groups = [
        g
        for g in index.groups
        if tn.tower_of(g.template) is None
        and tn.in_layer(tn.strip_lm_prefix(g.template))
        and tn.component_of_template(tn.strip_lm_prefix(g.template)) == "norms"
    ]
    stored: dict[int, set[str]] = defaultdict(set)
    for name in index.names_of(norm_groups):
        short = tn.strip_lm_prefix(name)
        layer = LAYER_INDEX.search(short)  # everything up to the layer's own modules (`model.layers.3.`) cut off
        module = short[layer.end() :].rsplit(".", 1)[0] if layer else short  # "input_layernorm", "self_attn.q_norm"
        idx = int(layer.group(1)) if layer else None
        if idx is not None and "." not in module:  # the layer's own norms, not a mixer's inner ones
            stored[idx].add(module)
    per_layer = [tuple(sorted(stored.get(layer.index, ()))) for layer in layers]
    if len(set(per_layer)) <= 1:
        return layers
    return tuple(replace(layer, norms=norms) for layer, norms in zip(layers, per_layer, strict=True))


def per_layer_tensors(index: TensorIndex, n: int) -> tuple[dict[int, set[str]], dict[int, bool]]:
    """Mixer roles and MoE-ness per decoder layer, from the per-layer groups (not the experts: a router marks a MoE
    layer)."""
    roles: dict[int, set[str]] = defaultdict(set)
    moe_layers: dict[int, bool] = {}
    for g in index.groups:
        tmpl = tn.strip_lm_prefix(g.template)
        if tn.tower_of(g.template) or not tn.in_layer(tmpl) or tn.component_of_template(tmpl) == "experts":
            continue
        role, comp = tn.layer_role(tmpl), tn.component_of_template(tmpl)
        if not role and comp not in ("mlp", "router", "shared_experts"):
            continue
        for idx in map(tn.layer_index, index.names_of([g])):
            if idx is None or idx >= n:
                continue
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
