"""Bytes a quantized weight takes on disk: the values plus their scales (and zero points), per method, for sizing
weights from config.json alone. A method without a byte model gives None: the weights are unknown, not guessed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ByteModel:
    description: str
    bits: float  # per stored value
    scale_bytes: int = 0
    block: tuple[int, int] | None = None  # (rows, columns) covered by one scale (fp8 128×128)
    group: int | None = None  # values along the input dimension covered by one scale; -1: one per row
    zero_bits: float = 0.0  # zero point bits per scale (asymmetric integer formats)
    per_tensor_bytes: int = 0
    experts_only: bool = False  # only the routed experts are quantized (MXFP4)

    def tensor_bytes(self, shape: tuple[int, ...]) -> int:
        """Bytes of one quantized weight (the last two dims are output × input; more are stacked)."""
        rows, cols = (shape[-2], shape[-1]) if len(shape) >= 2 else (1, shape[-1])
        stacked = math.prod(shape[:-2]) if len(shape) > 2 else 1
        values = math.ceil(rows * cols * self.bits / 8)
        if self.block is not None:
            scales = math.ceil(rows / self.block[0]) * math.ceil(cols / self.block[1])
        elif self.group == -1:
            scales = rows
        elif self.group:
            scales = rows * math.ceil(cols / self.group)
        else:
            scales = 0
        per_scale = self.scale_bytes + self.zero_bits / 8
        return stacked * (values + math.ceil(scales * per_scale) + self.per_tensor_bytes)


def ignored_modules(qc: dict[str, Any]) -> tuple[str, ...]:
    """The module names or patterns a `quantization_config` leaves unquantized, under any of its spellings."""
    raw = qc.get("modules_to_not_convert") or qc.get("ignore") or qc.get("ignored_layers") or ()
    return tuple(str(m) for m in raw) if isinstance(raw, list) else ()


def byte_model(qc: dict[str, Any]) -> ByteModel | None:
    """The byte model of a `quantization_config`, or None when the method has none here."""
    method = str(qc.get("quant_method") or qc.get("method") or "").lower()
    if method in ("fp8", "fbgemm_fp8", "finegrained_fp8"):
        block = qc.get("weight_block_size")
        if isinstance(block, list) and len(block) == 2 and all(isinstance(b, int) and b > 0 for b in block):
            return ByteModel(f"fp8: 1 B + a float32 scale per {block[0]}×{block[1]} block", 8, 4, block=tuple(block))
        if method == "fbgemm_fp8":
            return ByteModel("fp8: 1 B + a float32 scale per output row", 8, 4, group=-1)
        return ByteModel("fp8: 1 B + one float32 scale per tensor", 8, per_tensor_bytes=4)
    if method == "mxfp4":
        return ByteModel(
            "mxfp4: 4 bits + an E8M0 scale byte per 32 values, experts only", 4, 1, group=32, experts_only=True
        )
    if method in ("gptq", "awq", "gptq_marlin", "awq_marlin", "auto-round", "autoround"):
        bits = qc.get("bits") or qc.get("w_bit") or 4
        group = qc.get("group_size") or qc.get("q_group_size") or 128
        if not isinstance(bits, int) or not isinstance(group, int):
            return None
        # GPTQ and AWQ store packed zero points (`qzeros`) even for symmetric quantization.
        return ByteModel(
            f"{method}: {bits} bits + an fp16 scale and a {bits}-bit zero point per {group} values",
            bits,
            2,
            group=group if group > 0 else -1,
            zero_bits=bits,
        )
    if method == "modelopt":
        algo = str(qc.get("quant_algo") or (qc.get("quantization") or {}).get("quant_algo") or "").upper()
        if "FP4" in algo:
            return ByteModel(
                "nvfp4: 4 bits + an fp8 scale per 16 values + a float32 scale per tensor",
                4,
                1,
                group=16,
                per_tensor_bytes=4,
            )
        if "FP8" in algo:
            return ByteModel("fp8: 1 B + one float32 scale per tensor", 8, per_tensor_bytes=4)
        return None
    if method == "compressed-tensors":
        return _compressed_tensors(qc)
    if method == "bitsandbytes":
        if qc.get("load_in_4bit") or qc.get("_load_in_4bit"):
            return ByteModel("bitsandbytes 4-bit: 4 bits + a float32 absmax per 64 values", 4, 4, group=64)
        if qc.get("load_in_8bit") or qc.get("_load_in_8bit"):
            return ByteModel("bitsandbytes int8: 1 B + a float32 scale per output row", 8, 4, group=-1)
    return None


def _compressed_tensors(qc: dict[str, Any]) -> ByteModel | None:
    """The first config group's weight scheme (num_bits, strategy, block or group size)."""
    groups = qc.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        return None
    group = next(iter(groups.values()))
    weights = group.get("weights") if isinstance(group, dict) else None
    if not isinstance(weights, dict) or not isinstance(weights.get("num_bits"), int):
        return None
    bits, strategy = weights["num_bits"], str(weights.get("strategy") or "tensor")
    is_float = weights.get("type") == "float"
    scale = 4 if is_float and bits == 8 else 2  # fp8 checkpoints keep float32 scales; int packs fp16/bf16 ones
    if bits == 4 and is_float:
        scale = 1  # NVFP4 in compressed-tensors: fp8 group scales
    zero = 0 if weights.get("symmetric", True) else bits
    name = f"compressed-tensors {'float' if is_float else 'int'}{bits} ({strategy})"
    block = weights.get("block_structure")
    if strategy == "block" and isinstance(block, list) and len(block) == 2:
        return ByteModel(name, bits, scale, block=(int(block[0]), int(block[1])), zero_bits=zero)
    if strategy == "group" and isinstance(weights.get("group_size"), int):
        return ByteModel(name, bits, scale, group=weights["group_size"], zero_bits=zero)
    if strategy == "channel":
        return ByteModel(name, bits, scale, group=-1, zero_bits=zero)
    return ByteModel(name, bits, per_tensor_bytes=scale)
