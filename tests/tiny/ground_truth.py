"""Ground truth for `onboard inspect`, computed the expensive way: load the checkpoint with transformers and run it.

The pure-Python inspector (config + safetensors headers only) is tested against these numbers. Everything here
comes from the instantiated model or a real forward, not from re-deriving config arithmetic:

* parameters: `model.num_parameters()` (float32 load), with/without embeddings, vs numel in the safetensors files;
* per-layer kinds from the module structure (attention / MLA / linear attention / SSM / short conv) plus the
  attention pattern transformers applies (config.layer_types, module attributes, the cache it builds);
* KV bytes from a real cache (see kv_measure.py); MoE facts; tied embeddings checked by storage identity.

Layer-kind vocabulary: full | sliding | chunked | mla | linear | ssm | conv | none; a layer with two mixers in
parallel or in sequence (Falcon-H1, Zamba2 hybrid blocks) is joined with "+", attention first: "full+ssm".
"linear" covers linear-attention and linear-recurrence mixers (gated DeltaNet, lightning attention, RG-LRU,
RWKV); "ssm" covers Mamba / Mamba-2 mixers.

Fields worth knowing (transformers 5.24):
* num_parameters_exclude_embeddings drops every nn.Embedding (GPT-2's position table too), keeps an untied lm_head.
* safetensors_numel = num_parameters + persistent_buffers (e.g. e_score_correction_bias, xIELU beta/eps);
  `renamed_on_save`: MoE experts are written per expert (original layout) and fused at load, names differ.
* sliding_window[i]: the window of a sliding layer, the chunk size of a chunked one, else None.
* kv_cache (float32 forward, bytes per sequence): kv_bytes_per_token sums layers that grow without bound;
  sliding / chunked layers appear in kv_bytes_per_token_by_kind uncapped and in capped_bytes_per_sequence at
  their cap, which transformers sets at window - 1 tokens; state_bytes_per_sequence holds conv / SSM / recurrent
  states. Check: kv_bytes_per_token * long probe + capped + state == measured_total_bytes_at_long_probe.
* MLA: transformers 5.24 caches the compressed latent (kv_lora_rank + qk_rope_head_dim), not expanded K/V.
"""

from __future__ import annotations

import json
import math
import re
import struct
from pathlib import Path
from typing import Any

from tests.tiny import kv_measure

# Module class-name patterns (transformers 5.24 names), checked in this order.
LINEAR_RE = re.compile(r"DeltaNet|DeltaAttention|LightningAttention|Rglru|RecurrentBlock|RwkvSelfAttention")
SSM_RE = re.compile(r"Mixer$|MambaLayer$")
CONV_RE = re.compile(r"ShortConv$")
ATTENTION_RE = re.compile(r"(Attention|MLA)$")  # LongCat-Flash names its attention modules `LongcatFlashMLA`
EXPERTS_RE = re.compile(r"Experts$")
# Config keys naming the MoE facts, by family (first present wins).
NUM_EXPERTS_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
TOP_K_KEYS = ("num_experts_per_tok", "moe_k", "moe_topk", "top_k_experts", "num_experts_per_token")
SHARED_KEYS = ("n_shared_experts", "num_shared_experts", "moe_num_shared_experts")
WINDOW_KEYS = ("sliding_window", "attention_window_size", "window_size")
MAX_PROBE_WINDOW = 64
LAYER_TYPE_KIND = {"sliding_attention": "sliding", "hybrid_sliding": "sliding", "chunked_attention": "chunked"}


def safetensors_header(path: Path) -> dict[str, Any]:
    """The JSON header of one .safetensors file (tensor name -> dtype, shape, data_offsets)."""
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
    header.pop("__metadata__", None)
    return header


def decoder_layers(model: Any) -> list[Any]:
    """The decoder blocks: the first ModuleList in module order (model.layers, transformer.h, backbone.layers...)."""
    import torch

    for name, module in model.named_modules():
        if isinstance(module, torch.nn.ModuleList) and "expert" not in name:
            return list(module)
    raise ValueError(f"{type(model).__name__}: no ModuleList of decoder layers found")


def _config_value(config: Any, keys: tuple[str, ...]) -> Any:
    for key in keys:
        value = getattr(config, key, None)
        if value is not None:
            return value
    return None


def _mixers(layer: Any) -> tuple[list[Any], set[str]]:
    """Attention modules of one layer and the other mixer kinds (linear / ssm / conv) it contains."""
    attention, others = [], set()
    for module in layer.modules():
        name = type(module).__name__
        if LINEAR_RE.search(name):
            others.add("linear")
        elif SSM_RE.search(name):
            others.add("ssm")
        elif CONV_RE.search(name):
            others.add("conv")
        elif ATTENTION_RE.search(name) and not any(ATTENTION_RE.search(type(m).__name__) for m in attention):
            attention.append(module)
    return attention, others


def _attention_kind(i: int, attn: Any, config: Any, cache_row: dict[str, Any]) -> tuple[str, int | None]:
    """full / sliding / chunked / mla for the attention of layer i, and its window (tokens) if any."""
    if getattr(attn, "kv_lora_rank", None) is not None or hasattr(attn, "kv_a_proj_with_mqa"):
        return "mla", None
    layer_types = getattr(config, "layer_types", None)
    declared = layer_types[i] if isinstance(layer_types, (list, tuple)) and i < len(layer_types) else None
    if declared == "chunked_attention":
        return "chunked", getattr(config, "attention_chunk_size", None)
    if declared in LAYER_TYPE_KIND:
        return "sliding", getattr(attn, "sliding_window", None) or _config_value(config, WINDOW_KEYS)
    if declared is not None or getattr(attn, "is_sliding", None) is False:
        return "full", None
    if getattr(attn, "attention_type", None) == "local":  # GPT-Neo: global / local layers, window_size
        return "sliding", config.window_size
    if getattr(attn, "sliding_window", None) is not None and getattr(attn, "attention_type", None) != "global":
        return "sliding", attn.sliding_window
    if cache_row["capped_tokens"] is not None:
        return "sliding", _config_value(config, WINDOW_KEYS)  # e.g. Mistral: config.sliding_window, no layer_types
    return "full", None


def _moe(config: Any, layers: list[Any]) -> dict[str, Any] | None:
    """MoE facts: counts from the config, which layers carry experts from the module structure."""
    ffn = getattr(config, "ffn_config", None)  # DBRX nests them
    num = _config_value(config, NUM_EXPERTS_KEYS) or getattr(ffn, "moe_num_experts", None)
    moe_layers, structural = [], None
    for i, layer in enumerate(layers):
        experts = [m for m in layer.modules() if EXPERTS_RE.search(type(m).__name__)]
        if experts:
            moe_layers.append(i)
            fused = [p for p in experts[0].parameters(recurse=False) if p.dim() == 3]
            # Experts with all their weights: LongCat-Flash sizes gate_up for its zero (identity) experts too.
            structural = structural or (min(p.shape[0] for p in fused) if fused else None)
    if not moe_layers:
        return None
    top_k = _config_value(config, TOP_K_KEYS) or getattr(ffn, "moe_top_k", None)
    return {
        "num_experts": structural or num,
        "top_k": top_k,
        "num_shared_experts": _config_value(config, SHARED_KEYS),
        "moe_layers": moe_layers,
        "dense_layers": [i for i in range(len(layers)) if i not in moe_layers],
    }


def _parameters(model: Any, ckpt_dir: Path) -> dict[str, Any]:
    files = sorted(ckpt_dir.glob("*.safetensors"))
    headers = {f.name: safetensors_header(f) for f in files}
    tensors = {name: spec for header in headers.values() for name, spec in header.items()}
    numel = sum(math.prod(spec["shape"]) for spec in tensors.values())
    file_bytes = sum(spec["data_offsets"][1] - spec["data_offsets"][0] for spec in tensors.values())
    params = dict(model.named_parameters())
    state_dict = model.state_dict()
    persistent = {n: b.numel() for n, b in model.named_buffers() if n in state_dict}
    by_dtype: dict[str, int] = {}
    for spec in tensors.values():
        by_dtype[spec["dtype"]] = by_dtype.get(spec["dtype"], 0) + math.prod(spec["shape"])
    total = model.num_parameters()
    return {
        "num_parameters": total,
        "num_parameters_exclude_embeddings": model.num_parameters(exclude_embeddings=True),
        "safetensors_files": sorted(headers),
        "safetensors_tensors": len(tensors),
        "safetensors_numel": numel,
        "safetensors_numel_by_dtype": by_dtype,
        "safetensors_bytes": file_bytes,
        # State-dict entries that are not parameters (e.g. DeepSeek-V3 e_score_correction_bias): saved, not counted.
        "persistent_buffers": persistent,
        "numel_accounted": numel == total + sum(persistent.values()),
        # transformers 5 saves MoE experts in the original per-expert layout and loads them fused: names differ.
        "renamed_on_save": set(tensors) != set(params) | set(persistent),
    }


def ground_truth(model_type: str, ckpt_dir: Path) -> dict[str, Any]:
    """Load `ckpt_dir` with transformers, run it, and return the facts `onboard inspect` must reproduce."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    ckpt_dir = Path(ckpt_dir)
    loaded = AutoModelForCausalLM.from_pretrained(ckpt_dir, dtype="auto").eval()
    ckpt_dtype = str(next(loaded.parameters()).dtype).removeprefix("torch.")
    weights_bytes = sum(p.numel() * p.element_size() for p in loaded.parameters())
    model = loaded if ckpt_dtype == "float32" else AutoModelForCausalLM.from_pretrained(ckpt_dir, dtype=torch.float32)
    model.eval()
    config = model.config
    notes: list[str] = []
    layers = decoder_layers(model)

    windows = [getattr(config, k, None) for k in (*WINDOW_KEYS, "attention_chunk_size")]
    # bool is an int: a `sliding_window=False` must not become a 0-token window
    window = max([w for w in windows if type(w) is int and w > 0] or [kv_measure.SHORT])
    if window > MAX_PROBE_WINDOW:  # a 4096 default left in a tiny config would make the probe 8k tokens long
        notes.append(f"window {window} > {MAX_PROBE_WINDOW}: the long probe cannot reach it, caps not measured")
        window = MAX_PROBE_WINDOW
    vocab = getattr(config, "vocab_size", 1000)
    short = kv_measure.fold_sublayers(kv_measure.run_probe(model, layers, kv_measure.SHORT, vocab), len(layers))
    long = kv_measure.run_probe(model, layers, max(2 * window, 2 * kv_measure.SHORT) + 3, vocab)
    long = kv_measure.fold_sublayers(long, len(layers))
    cache_rows = kv_measure.classify(short, long, len(layers))

    kinds, layer_windows = [], []
    for i, layer in enumerate(layers):
        attention, others = _mixers(layer)
        parts, layer_window = [], None
        if attention:
            kind, layer_window = _attention_kind(i, attention[0], config, cache_rows[i])
            parts.append(kind)
            if kind in ("sliding", "chunked") and cache_rows[i]["capped_tokens"] is None:
                notes.append(f"layer {i}: {kind} attention but transformers' cache keeps every token (no cap)")
        parts += sorted(others)
        kinds.append("+".join(parts) or "none")
        layer_windows.append(layer_window)
        cache_rows[i]["kind"] = kinds[-1]

    kv = _kv_summary(cache_rows, long, short)
    if not long.bytes:
        notes.append("the model returns no cache (use_cache unsupported): nothing measured")
    mla = _mla(config, model.dtype, cache_rows, kinds, notes)
    embeddings_in, embeddings_out = model.get_input_embeddings(), model.get_output_embeddings()
    tied = embeddings_out is not None and embeddings_out.weight.data_ptr() == embeddings_in.weight.data_ptr()
    return {
        "model_type": model_type,
        "config_class": type(config).__name__,
        "model_class": type(model).__name__,
        "architectures": getattr(config, "architectures", None),
        "transformers_version": transformers.__version__,
        "dtype": ckpt_dtype,
        "num_layers": len(layers),
        **_parameters(model, ckpt_dir),
        "weights_bytes_measured": weights_bytes,
        "tie_word_embeddings": tied,
        "tie_word_embeddings_config": getattr(config, "tie_word_embeddings", None),
        "layer_kinds": kinds,
        "sliding_window": layer_windows,
        "moe": _moe(config, layers),
        "kv_cache": kv,
        "mla": mla,
        "notes": notes,
    }


def _kv_summary(rows: list[dict[str, Any]], long: kv_measure.Probe, short: kv_measure.Probe) -> dict[str, Any]:
    """Totals per sequence: per-token bytes of layers that grow, capped bytes of sliding/chunked, fixed states."""
    by_kind: dict[str, int] = {}
    for row in rows:
        if row["kv_bytes_per_token"]:
            by_kind[row["kind"]] = by_kind.get(row["kind"], 0) + row["kv_bytes_per_token"]
    growing = sum(r["kv_bytes_per_token"] for r in rows if r["capped_tokens"] is None)
    capped = sum(r["capped_bytes"] for r in rows)
    state = sum(r["state_bytes"] for r in rows)
    total_long = sum(long.bytes.values()) // kv_measure.BATCH
    return {
        "cache_class": long.cache_class,
        "dtypes": sorted(long.dtypes | short.dtypes),
        "probe_tokens": [short.tokens, long.tokens],
        # Bytes per token summed over all layers whose cache grows without bound (full attention, MLA).
        "kv_bytes_per_token": growing,
        # Per layer kind, bytes per token before any cap (sliding layers included, uncapped).
        "kv_bytes_per_token_by_kind": by_kind,
        # Sliding/chunked layers at their cap: transformers keeps window - 1 tokens (a serving engine: window).
        "capped_bytes_per_sequence": capped,
        "state_bytes_per_sequence": state,
        # Check of the three numbers above: everything cached after the long probe, per sequence.
        "measured_total_bytes_at_long_probe": total_long,
        "per_layer": rows,
    }


def _mla(config: Any, dtype: Any, rows: list[dict[str, Any]], kinds: list[str], notes: list[str]) -> Any:
    """MLA latent size (kv_lora_rank + qk_rope_head_dim per token per layer) next to what was measured."""
    if "mla" not in kinds:
        return None
    import torch

    itemsize = torch.empty((), dtype=dtype).element_size()
    latent = (config.kv_lora_rank + config.qk_rope_head_dim) * itemsize
    heads = config.num_attention_heads
    expanded = heads * (config.qk_nope_head_dim + config.qk_rope_head_dim + config.v_head_dim) * itemsize
    measured = sorted({r["kv_bytes_per_token"] for r, k in zip(rows, kinds) if k == "mla"})
    # DeepSeek sparse attention (V3.2, GLM-MoE-DSA) also caches its indexer keys, one vector per token.
    indexer = sorted({_growing_bytes(r, "indexer_keys") for r, k in zip(rows, kinds) if k == "mla"})
    if measured == [latent + indexer[0]] and len(indexer) == 1:
        extra = f" plus {indexer[0]} B of DSA indexer keys" if indexer[0] else ""
        notes.append(f"MLA: transformers caches the compressed latent (kv_lora_rank + qk_rope_head_dim){extra}")
    else:
        notes.append(f"MLA: measured {measured} B/token/layer, latent would be {latent}, expanded K/V {expanded}")
    return {
        "kv_lora_rank": config.kv_lora_rank,
        "qk_rope_head_dim": config.qk_rope_head_dim,
        "latent_bytes_per_token_per_layer": latent,
        "expanded_kv_bytes_per_token_per_layer": expanded,
        "indexer_bytes_per_token_per_layer": indexer,
        "measured_bytes_per_token_per_layer": measured,
    }


def _growing_bytes(row: dict[str, Any], name: str) -> int:
    """Bytes per token of one cached tensor of a layer row (0 when the layer has no such tensor)."""
    tensor = row["tensors"].get(name)
    if tensor is None or tensor["kind"] == "state":
        return 0
    short_key = next(k for k in tensor if k.startswith("bytes@"))
    return tensor[short_key] // int(short_key.removeprefix("bytes@"))
