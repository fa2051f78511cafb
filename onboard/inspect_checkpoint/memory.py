"""Memory plan: weight bytes, KV cache per token and per sequence by layer kind, and fit on a target GPU.

Full attention caches kv_heads × (head_dim + v_head_dim) per token, sliding / chunked layers the same capped at the
window, MLA one latent (kv_lora_rank + qk_rope_head_dim) per token; recurrent layers keep a fixed state per sequence.
"""

from __future__ import annotations

import re

import msgspec

from onboard.errors import InputError
from onboard.inspect_checkpoint.config_view import ConfigView
from onboard.inspect_checkpoint.layer_plan import class_layer_types
from onboard.inspect_checkpoint.target_fit import GIB, CacheLayer, CacheModel, Sharding, fit_target
from onboard.names.config import spellings
from onboard.profile import Dims, LayerInfo, MemoryPlan, Quantization, Ssm, WeightsEstimate

KV_DTYPE_BYTES = {
    "float32": 4, "fp32": 4, "float16": 2, "fp16": 2, "half": 2, "bfloat16": 2, "bf16": 2,
    "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "int8": 1,
}  # fmt: skip

# Usable HBM per GPU in bytes (vendor figures; vLLM then applies gpu_memory_utilization, see target_fit.py).
GPUS = {
    "h100": 80 * GIB, "h100-sxm": 80 * GIB, "h100-pcie": 80 * GIB, "h100-nvl": 94 * GIB, "h800": 80 * GIB,
    "h200": 141 * GIB, "h20": 96 * GIB, "b200": 180 * GIB, "b300": 288 * GIB, "gb200": 186 * GIB,
    "a100-80g": 80 * GIB, "a100": 80 * GIB, "a100-40g": 40 * GIB, "l40s": 48 * GIB, "l40": 48 * GIB,
    "l4": 24 * GIB, "a10g": 24 * GIB, "a10": 24 * GIB, "rtx4090": 24 * GIB, "rtx6000-ada": 48 * GIB,
    "rtx-pro-6000": 96 * GIB, "mi300x": 192 * GIB, "mi325x": 256 * GIB, "mi355x": 288 * GIB, "tpu-v5e": 16 * GIB,
}  # fmt: skip


class Target(msgspec.Struct, frozen=True):
    gpu: str
    count: int


def parse_target(text: str) -> Target:
    """`h100`, `h100x8`, `8xh100`, `a100-80g x4` → Target."""
    spec = text.strip().lower().replace(" ", "")
    m = re.fullmatch(r"(?:(\d+)x)?([a-z0-9\-]+?)(?:x(\d+))?", spec)
    if not m or m.group(2) not in GPUS:
        raise InputError(
            f"unknown --target {text!r}",
            f"use GPU[xN] with GPU one of: {', '.join(sorted(GPUS))} (e.g. h100x8)",
        )
    count = int(m.group(1) or m.group(3) or 1)
    if count < 1 or count > 1024:
        raise InputError(f"--target {text!r}: GPU count must be between 1 and 1024")
    return Target(m.group(2), count)


def kv_dtype_bytes(kv_dtype: str) -> int:
    key = kv_dtype.lower()
    if key not in KV_DTYPE_BYTES:
        raise InputError(f"unknown --kv-dtype {kv_dtype!r}", f"use one of: {', '.join(sorted(KV_DTYPE_BYTES))}")
    return KV_DTYPE_BYTES[key]


def per_token_elements(layer: LayerInfo, dims: Dims, cv: ConfigView) -> int:
    """Cache elements one token adds in this layer (before any window cap)."""
    if layer.kv_source is not None:  # it attends over another layer's cache and caches nothing (a DummyLayer)
        return 0
    if layer.attention == "mla":
        # kv_width: kv_a_proj_with_mqa's rows, when the headers are there
        rank = cv.int("kv_lora_rank", default=0) or 0
        rope = cv.int("qk_rope_head_dim", default=0) or 0
        return (layer.kv_width or (rank + rope) * _attention_sublayers(cv)) + _indexer_elements(layer, cv, mla=True)
    indexer = _indexer_elements(layer, cv, mla=False)
    if layer.kv_width:
        return layer.kv_width + indexer
    if layer.attention in ("full", "sliding", "chunked"):
        own = _layer_overrides(layer, cv)
        own_dim = _int(own.get("head_dim"))  # V follows an overridden head_dim unless v_head_dim is overridden too
        v_dim = _int(own.get("v_head_dim")) or own_dim or dims.v_head_dim or dims.head_dim
        heads = _int(own.get("num_key_value_heads")) or dims.num_kv_heads
        return heads * ((own_dim or dims.head_dim) + v_dim) + indexer
    return 0


def _layer_overrides(layer: LayerInfo, cv: ConfigView) -> dict:
    """This layer's entry of `per_layer_config` (transformers' heterogeneous configs, keyed by layer index)."""
    table = cv.get("per_layer_config")
    if table is None and cv.model_type in _GLOBAL_HEAD_DIM:
        return _global_layer_overrides(layer, cv)
    own = table.get(str(layer.index), table.get(layer.index)) if isinstance(table, dict) else None
    return own if isinstance(own, dict) else {}


# Config classes that build per_layer_config themselves when config.json has none: full-attention layers get head_dim
# global_head_dim (default 512) and, with attention_k_eq_v, num_global_key_value_heads KV heads.
_GLOBAL_HEAD_DIM = ("gemma4_text", "gemma4_unified_text", "diffusion_gemma_text")


def _global_layer_overrides(layer: LayerInfo, cv: ConfigView) -> dict:
    # The declared types: a sliding layer whose window never binds is "full" in the plan but keeps its head_dim.
    types = class_layer_types(cv)
    full = types[layer.index] == "full_attention" if types else layer.attention == "full"
    if not full:
        return {}
    own = {"head_dim": cv.int("global_head_dim", default=512)}
    if cv.get("attention_k_eq_v", default=False):  # Gemma4TextConfig's default
        own["num_key_value_heads"] = cv.int("num_global_key_value_heads")
    return own


def _int(value: object) -> int | None:
    return value if isinstance(value, int) else None


def _attention_sublayers(cv: ConfigView) -> int:
    """Attention modules one decoder layer holds, each with its own cache: LongCat-Flash runs two MLA sublayers."""
    return 2 if cv.model_type == "longcat_flash" else 1


def _indexer_elements(layer: LayerInfo, cv: ConfigView, mla: bool) -> int:
    """Keys a sparse-attention indexer caches per token: on every MLA layer with index_topk (DeepSeek V3.2), or on
    the layers `layer_types` marks `indexed_attention` (Qwen4-Exp)."""
    types = cv.get("layer_types")
    indexed = isinstance(types, list) and layer.index < len(types) and types[layer.index] == "indexed_attention"
    if not indexed and not (mla and cv.has("index_topk")):
        return 0
    return cv.int("index_head_dim", "indexer_head_dim", default=0) or 0


def state_elements(layer: LayerInfo, dims: Dims, cv: ConfigView, ssm: Ssm | None = None) -> int:
    """Fixed per-sequence state of a layer (conv window + SSM / delta-rule state); `ssm`: the SSM layers' mixer."""
    kind = layer.attention
    if kind == "full" and cv.model_type == "cpmant":
        # CPM-Ant prepends prompt_length learned prompt tokens to every sequence: a fixed K and V prefix.
        return (cv.int("prompt_length", default=0) or 0) * per_token_elements(layer, dims, cv)
    if kind in ("full", "sliding") and (cv.model_type == "zaya" or cv.has("cca_time0")):
        # ZAYA's compressed convolutional attention: a causal conv window over q and k ((cca_time0 - 1) +
        # (cca_time1 - 1) steps) and the previous token's delayed half of V.
        q, kv = dims.num_attention_heads * dims.head_dim, dims.num_kv_heads * dims.head_dim
        steps = (cv.int("cca_time0", default=2) or 2) - 1 + (cv.int("cca_time1", default=2) or 2) - 1
        return (q + kv) * steps + kv // 2
    inkling = cv.model_type in _INKLING or cv.has("swa_num_key_value_heads") and cv.has("conv_kernel_size")
    if kind in ("full", "sliding") and inkling:
        # Inkling: short causal convs over k, v, the attention input and the MLP input, conv_kernel_size steps each.
        if kind == "sliding":
            kv = (cv.int("swa_num_key_value_heads") or 0) * (cv.int("swa_head_dim") or dims.head_dim)
        else:
            kv = dims.num_kv_heads * dims.head_dim
        return (2 * kv + 2 * dims.hidden_size) * (cv.int("conv_kernel_size", "sconv_kernel_size") or 4)
    if kind not in ("ssm", "linear", "conv") and not layer.parallel_ssm:
        return 0
    hidden = dims.hidden_size
    if kind == "conv":
        # conv_L_cache's default: Lfm3Config's 7, Lfm2Config's 3.
        default = 7 if cv.model_type == "lfm3" else 3
        return hidden * (cv.int("conv_L_cache", "conv_kernel", "short_conv_kernel") or default)
    if kind == "linear":
        return _linear_state(cv, dims)
    # Mamba-style selective state spaces: the conv window over what the mixer convolves, plus the scan's state.
    if ssm is None:
        return 0
    if ssm.version == 2:  # conv over x, B and C; heads × head_dim × state
        heads_dim = (ssm.num_heads or 0) * (ssm.head_dim or 0)
        return (ssm.inner_size + 2 * ssm.n_groups * ssm.state_size) * ssm.conv_kernel + heads_dim * ssm.state_size
    return ssm.inner_size * ssm.conv_kernel + ssm.inner_size * ssm.state_size


# Inkling text models (transformers 5.25): attention layers with short convs (state_elements).
_INKLING = ("inkling_text", "inkling2_text", "inkling2_loop_text")


def _linear_state(cv: ConfigView, dims: Dims) -> int:
    """Fixed state of a linear-attention layer, by family: recurrent matrix plus short-conv windows."""
    mt = cv.model_type
    if mt == "recurrent_gemma":  # RG-LRU: one state vector plus the temporal conv window
        width = cv.int("lru_width", default=dims.hidden_size) or dims.hidden_size
        return width + width * ((cv.int("conv1d_width", default=4) or 4) - 1)
    if mt == "rwkv":  # RWKV-4: numerator, denominator, max and two token-shift vectors per layer
        return 5 * (cv.int("attention_hidden_size", default=dims.hidden_size) or dims.hidden_size)
    if mt.startswith("minimax"):  # lightning attention: a head_dim × head_dim state per head, no conv
        return dims.num_attention_heads * dims.head_dim * dims.head_dim
    heads = cv.int("linear_num_heads", default=None)
    if heads:  # Kimi-Linear / Bailing (KDA): q, k, v short convs and a head_dim² state per head
        d = cv.int("linear_head_dim", default=dims.head_dim) or dims.head_dim
        kernel = cv.int("linear_conv_kernel_dim", "short_conv_kernel_size", default=4) or 4
        return 3 * heads * d * kernel + heads * d * d
    # Gated DeltaNet (Qwen3-Next): conv over q, k, v and a k_dim × v_dim state per value head.
    k_heads = cv.int("linear_num_key_heads", default=dims.num_attention_heads) or 0
    v_heads = cv.int("linear_num_value_heads", default=k_heads) or 0
    k_dim = cv.int("linear_key_head_dim", default=dims.head_dim) or 0
    v_dim = cv.int("linear_value_head_dim", default=dims.head_dim) or 0
    kernel = cv.int("linear_conv_kernel_dim", "conv_kernel", default=4) or 4
    return (2 * k_heads * k_dim + v_heads * v_dim) * kernel + v_heads * k_dim * v_dim


def plan_memory(
    cv: ConfigView,
    dims: Dims,
    layers: tuple[LayerInfo, ...],
    weights_bytes: int | None,
    kv_dtype: str,
    max_model_len: int,
    target: Target | None,
    *,
    weights_source: str = "headers",
    weights_estimate: WeightsEstimate | None = None,
    quantization: Quantization | None = None,
    ssm: Ssm | None = None,
) -> MemoryPlan:
    # Per-layer attention sizes: read where the k/v tensors do not give a layer's width, and by composition.
    cv.mark_used("per_layer_config")
    width = kv_dtype_bytes(kv_dtype)
    cache_layers: list[CacheLayer] = []
    by_kind: dict[str, int] = {}
    per_seq = 0
    state_elems = 0
    per_token = 0
    passes = _cache_passes(cv, len(layers))
    for layer in layers:
        elements = per_token_elements(layer, dims, cv) * passes[layer.index]
        if elements:
            by_kind[layer.attention] = by_kind.get(layer.attention, 0) + elements * width
            tokens = min(layer.window, max_model_len) if layer.window else max_model_len
            per_seq += elements * width * tokens
            if not layer.window or layer.window >= max_model_len:
                per_token += elements * width  # still growing at max_model_len
            cache_layers.append(CacheLayer(elements, layer.window, layer.attention == "mla"))
        state_elems += state_elements(layer, dims, cv, ssm) * passes[layer.index]
    state = state_elems * width
    fit = None
    if target:
        cache = CacheModel(tuple(cache_layers), state_elems, dims.num_kv_heads)
        fit = fit_target(
            target.gpu,
            target.count,
            GPUS[target.gpu],
            weights_bytes,
            cache,
            max_model_len,
            width,
            _sharding(cv, dims, layers, quantization),
        )
    return MemoryPlan(
        weights_bytes=weights_bytes,
        kv_dtype=kv_dtype,
        max_model_len=max_model_len,
        kv_bytes_per_token=per_token,
        kv_bytes_per_token_by_kind=by_kind,
        state_bytes_per_sequence=state,
        kv_bytes_per_sequence=per_seq + state,
        target=fit,
        weights_source=weights_source,
        weights_estimate=weights_estimate,
    )


def _cache_passes(cv: ConfigView, n: int) -> list[int]:
    """Caches each layer keeps per sequence: one per pass for looped layers (Inkling-2-Loop), else 1."""
    start, end = cv.int("loop_layer_index_start"), cv.int("loop_layer_index_end")
    loops = cv.int("loop_num_passes", default=1) or 1
    out = [1] * n
    if start is not None and end is not None and loops > 1:
        for i in range(max(0, start), min(n, end)):
            out[i] = loops
    return out


def _sharding(cv: ConfigView, dims: Dims, layers: tuple[LayerInfo, ...], quant: Quantization | None) -> Sharding:
    widths = {
        w for w in (dims.intermediate_size, cv.int(*spellings("moe_intermediate_size"))) if isinstance(w, int) and w > 0
    }
    block = quant.block_size[0] if quant and quant.block_size and len(quant.block_size) == 2 else None
    mla = any(layer.attention == "mla" for layer in layers)
    return Sharding(dims.num_attention_heads, dims.num_kv_heads, mla, tuple(sorted(widths)), block)
