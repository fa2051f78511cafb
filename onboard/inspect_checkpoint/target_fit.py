"""Fit on a target: the smallest tensor-parallel degree engines accept whose share of weights and cache fits a GPU.

Per GPU at TP degree t (vLLM's accounting): weights / t; max(1, kv_heads // t) of the KV heads; the whole MLA latent
(vLLM's ModelConfig.get_num_kv_heads and SGLang's get_cell_size_per_token never divide it); recurrent state / t.
A degree is valid when it divides the attention heads, the KV heads divide it or it divides them, the MLP widths
split evenly, and each shard of a block-quantized weight is whole blocks.
"""

from __future__ import annotations

import msgspec

from onboard.profile import TargetFit

GIB = 1024**3
GPU_MEMORY_UTILIZATION = 0.90  # vLLM's default share of HBM it will use
ACTIVATION_RESERVE = 2 * GIB  # activations, CUDA graphs and allocator slack per GPU (vLLM profiles ~1–3 GiB)
MORE_GPUS_LIMIT = 8  # how far "more GPUs" looks: up to 8× the target's count


class CacheLayer(msgspec.Struct, frozen=True):
    elements: int  # cache elements one token adds in this layer
    window: int | None  # tokens kept at most (sliding / chunked)
    replicated: bool  # MLA: every tensor-parallel rank holds the whole latent


class CacheModel(msgspec.Struct, frozen=True):
    """What one sequence caches, layer by layer, to size it at any length, KV width and TP degree."""

    layers: tuple[CacheLayer, ...]
    state_elements: int  # fixed recurrent state per sequence
    kv_heads: int

    def bytes_per_gpu(self, length: int, width: int, tp: int) -> float:
        """Bytes one sequence of `length` tokens takes on each GPU at TP degree `tp` with `width`-byte elements."""
        share = max(1, self.kv_heads // tp) / self.kv_heads if self.kv_heads else 1 / tp
        total = 0.0
        for layer in self.layers:
            tokens = min(layer.window, length) if layer.window else length
            total += layer.elements * width * tokens * (1.0 if layer.replicated else share)
        return total + self.state_elements * width / tp


class Sharding(msgspec.Struct, frozen=True):
    """The sizes a TP degree must split evenly."""

    attention_heads: int
    kv_heads: int
    mla: bool
    mlp_widths: tuple[int, ...]  # dense and expert intermediate sizes
    quant_block: int | None  # rows of a block-quantized weight covered by one scale (fp8 128)

    def why_not(self, tp: int) -> str | None:
        """None when engines accept `tp`, else the reason in words."""
        if self.attention_heads and self.attention_heads % tp:
            return f"{self.attention_heads} attention heads do not split {tp} ways"
        kv = self.kv_heads
        if not self.mla and kv and kv % tp and tp % kv:
            return f"{kv} KV heads neither split {tp} ways nor replicate evenly"
        for width in self.mlp_widths:
            if width % tp:
                return f"MLP width {width} does not split {tp} ways"
            if self.quant_block and (width // tp) % self.quant_block:
                return (
                    f"MLP width {width} / {tp} = {width // tp} is not a multiple of the {self.quant_block}-row "
                    "quantization block"
                )
        return None

    def valid(self, limit: int) -> list[int]:
        return [tp for tp in range(1, limit + 1) if self.why_not(tp) is None]


def per_gpu_budget(memory_per_gpu: int, weights: int, tp: int) -> float:
    return memory_per_gpu * GPU_MEMORY_UTILIZATION - ACTIVATION_RESERVE - weights / tp


def fit_target(
    gpu: str,
    count: int,
    memory_per_gpu: int,
    weights: int | None,
    cache: CacheModel,
    length: int,
    width: int,
    sharding: Sharding,
) -> TargetFit:
    """Smallest valid TP degree ≤ count that holds its weight shard plus one sequence; else what would fit."""
    valid = sharding.valid(count)
    notes: list[str] = []
    if any(layer.replicated for layer in cache.layers):
        notes.append("MLA latent cache counted whole on every tensor-parallel rank, as vLLM and SGLang allocate it")
    if weights is None:
        notes.append("weight bytes unknown: no fit claim (inspect the repo with its .safetensors files)")
        return TargetFit(gpu, count, memory_per_gpu, None, None, 0, tuple(notes), tuple(valid))
    chosen = _smallest_fit(valid, memory_per_gpu, weights, cache, length, width)
    invalid = [tp for tp in range(2, count + 1) if tp not in valid]
    if invalid:
        notes.append(
            f"valid tensor-parallel degrees ≤ {count}: {', '.join(map(str, valid))} (e.g. tp={invalid[0]}: "
            f"{sharding.why_not(invalid[0])})"
        )
    too_small = [tp for tp in valid if chosen is None or tp < chosen]
    if too_small:
        usable = memory_per_gpu * GPU_MEMORY_UTILIZATION - ACTIVATION_RESERVE
        notes.append(
            f"tp={', '.join(map(str, too_small))}: the weight shard plus one sequence of {length} tokens "
            f"exceed the {usable / GIB:.1f} GiB usable per {gpu}"
        )
    if chosen is None:
        largest = valid[-1] if valid else 1
        if per_gpu_budget(memory_per_gpu, weights, largest) <= 0:
            notes.append(
                f"the weight shard alone ({weights / largest / GIB:.1f} GiB at tensor parallel {largest}) "
                f"exceeds the usable memory of one {gpu}"
            )
        would = _what_would_fit(gpu, count, memory_per_gpu, weights, cache, length, width, sharding)
        return TargetFit(gpu, count, memory_per_gpu, False, None, 0, tuple(notes), tuple(valid), tuple(would))
    per_sequence = cache.bytes_per_gpu(length, width, chosen)
    budget = per_gpu_budget(memory_per_gpu, weights, chosen)
    replicas = count // chosen  # the remaining GPUs serve as data-parallel replicas
    sequences = int(budget // per_sequence) * replicas if per_sequence else 0
    if replicas > 1:
        notes.append(f"{replicas} replicas of tp={chosen}")
    return TargetFit(gpu, count, memory_per_gpu, True, chosen, sequences, tuple(notes), tuple(valid))


def _smallest_fit(valid: list[int], mem: int, weights: int, cache: CacheModel, length: int, width: int) -> int | None:
    for tp in valid:
        budget = per_gpu_budget(mem, weights, tp)
        if budget > 0 and budget >= cache.bytes_per_gpu(length, width, tp):
            return tp
    return None


def _what_would_fit(
    gpu: str, count: int, mem: int, weights: int, cache: CacheModel, length: int, width: int, sharding: Sharding
) -> list[str]:
    out: list[str] = []
    more = _smallest_fit(
        sharding.valid(count * MORE_GPUS_LIMIT)[len(sharding.valid(count)) :], mem, weights, cache, length, width
    )
    if more is not None:
        out.append(f"{more}× {gpu} at tensor parallel {more}")
    if width > 1:
        tp = _smallest_fit(sharding.valid(count), mem, weights, cache, length, 1)
        if tp is not None:
            out.append(f"an fp8 KV cache (--kv-dtype fp8) at tensor parallel {tp}")
    valid = sharding.valid(count)
    largest = valid[-1] if valid else 1
    budget = per_gpu_budget(mem, weights, largest)
    if budget > 0:
        low, high = 0, length  # the longest context whose one sequence fits beside the weight shard
        while low < high:
            mid = (low + high + 1) // 2
            if cache.bytes_per_gpu(mid, width, largest) <= budget:
                low = mid
            else:
                high = mid - 1
        if low >= 1:
            out.append(f"a shorter context (--max-model-len {low}) at tensor parallel {largest}")
    return out
