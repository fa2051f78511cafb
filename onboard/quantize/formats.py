"""The quantization formats a plan chooses from: how each rounds, what it stores (bytes per tensor, scales included)
and which engine serves it. A format that cannot hold a shape falls back as the engine does (llama.cpp's
llama_tensor_get_type) or does not apply (vLLM's group and block kernels need input widths divisible by 128).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from onboard.quantize import ggml_kquants as ggml
from onboard.quantize import ggml_native, numerics

BF16 = "bf16"
LLAMA_CPP = "llama.cpp"
VLLM = "vllm"
LINEAR_KINDS = ("attn", "mlp", "experts", "shared_experts", "head")


@dataclass(frozen=True)
class Format:
    name: str
    engine: str
    """LLAMA_CPP or VLLM; BF16 is both ("any")."""
    block: int
    """Elements per block along the input dimension, 1 for none."""
    bytes_per_block: float
    weight: Callable[[torch.Tensor], torch.Tensor]
    activation: Callable[[torch.Tensor], torch.Tensor] | None
    """What the engine does to a matmul's input before multiplying (None: the activation stays in the model dtype)."""
    kinds: tuple[str, ...]
    """Unit kinds the engine quantizes with this format (vLLM never quantizes the token embedding)."""
    ggml_type: str | None = None
    fallback: str | None = None
    """llama.cpp's replacement when the row length is not a multiple of `block`."""
    per_row_bytes: float = 0.0
    per_tensor_bytes: float = 0.0
    tile: int = 0
    """Square weight blocks with one float32 scale each (fp8 per-block)."""
    native_only: bool = False
    """Rounded only by llama.cpp's library (ggml_native): no torch port of its scale search."""
    activation_per_token: bool = True
    """One token's activation rounding depends on that token alone; False for fp8's dynamic per-tensor scale."""

    @property
    def row_local(self) -> bool:
        """Each row rounds on its own: a subset of rows quantizes to the same values as in the whole tensor."""
        return not self.per_tensor_bytes and not self.tile

    def applies(self, shape: tuple[int, ...]) -> bool:
        return shape[-1] % self.block == 0 or self.fallback is not None

    def resolve(self, shape: tuple[int, ...]) -> Format:
        """The format the engine really stores this tensor in: the fallback, or F16 where that does not fit either."""
        if shape[-1] % self.block == 0 or not self.fallback:
            return self
        fallback = FORMATS[self.fallback]
        return fallback if shape[-1] % fallback.block == 0 else FORMATS["f16"]

    def nbytes(self, shape: tuple[int, ...]) -> float:
        fmt = self.resolve(shape)
        elements = 1
        for size in shape:
            elements *= size
        rows = elements // shape[-1]
        total = elements / fmt.block * fmt.bytes_per_block + rows * fmt.per_row_bytes + fmt.per_tensor_bytes
        if fmt.tile:
            lead = elements // (shape[-1] * shape[-2])
            total += lead * -(-shape[-2] // fmt.tile) * -(-shape[-1] // fmt.tile) * 4
        return total

    def quantize(self, w: torch.Tensor) -> torch.Tensor:
        """Dequantized float32 values of `w` ([..., out, in], float32) as the engine holds them: llama.cpp's
        formats by its own library where installed (ggml_native), else by `weight`."""
        fmt = self.resolve(tuple(w.shape))
        if fmt.engine == LLAMA_CPP and fmt.ggml_type:
            native = ggml_native.quantize(w, fmt.ggml_type, fmt.block, fmt.bytes_per_block)
            if native is not None:
                return native
        return fmt.weight(w)


def _identity(w: torch.Tensor) -> torch.Tensor:
    return w


_ALL_KINDS = ("embedding", *LINEAR_KINDS)
NEEDS_LIBRARY = (
    "from llama.cpp's own quantizers (no torch port): install them with scripts/install_llama_cpp.sh, or point "
    "ONBOARD_LLAMACPP_VENV at a llama-cpp-python install (and leave ONBOARD_GGML_NATIVE unset)"
)


def _library_only(type_name: str) -> Callable[[torch.Tensor], torch.Tensor]:
    def weight(w: torch.Tensor) -> torch.Tensor:
        # Plans drop the format first (usable): reached only by a caller that skipped that.
        raise RuntimeError(f"{type_name} needs rounding {NEEDS_LIBRARY}")

    return weight


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format(BF16, "any", 1, 2.0, _identity, None, _ALL_KINDS, ggml_type="bf16"),
        Format("int8", VLLM, 1, 1.0, numerics.int8_per_channel, numerics.int8_per_token, LINEAR_KINDS,
               per_row_bytes=4.0),
        Format("fp8", VLLM, 1, 1.0, numerics.fp8_per_tensor, numerics.fp8_per_tensor, LINEAR_KINDS,
               per_tensor_bytes=4.0, activation_per_token=False),
        Format("fp8-block", VLLM, 128, 128.0, numerics.fp8_block, numerics.fp8_per_token_group, LINEAR_KINDS,
               tile=128),
        Format("int4-g128", VLLM, 128, 64.0 + 2.0 + 0.5, numerics.int4_group_asym, None, LINEAR_KINDS),
        Format("mxfp4", LLAMA_CPP, 32, 17.0, numerics.mxfp4, ggml.q8_0_activation, _ALL_KINDS, ggml_type="mxfp4"),
        Format("q8_0", LLAMA_CPP, 32, 34.0, lambda w: ggml.via_gguf(w, "Q8_0"), ggml.q8_0_activation, _ALL_KINDS,
               ggml_type="q8_0"),
        Format("q6_k", LLAMA_CPP, 256, 210.0, ggml.q6_k, ggml.q8_k_activation, _ALL_KINDS, ggml_type="q6_K",
               fallback="q8_0"),
        Format("q4_k", LLAMA_CPP, 256, 144.0, ggml.q4_k, ggml.q8_k_activation, _ALL_KINDS, ggml_type="q4_K",
               fallback="q5_0"),
        # Q4_1 / Q5_1 multiply with Q8_1 activations: Q8_0's rounding plus a block sum (its fp16 rounding is not
        # simulated).
        Format("q5_1", LLAMA_CPP, 32, 24.0, lambda w: ggml.via_gguf(w, "Q5_1"), ggml.q8_0_activation, _ALL_KINDS,
               ggml_type="q5_1"),
        Format("q4_1", LLAMA_CPP, 32, 20.0, lambda w: ggml.via_gguf(w, "Q4_1"), ggml.q8_0_activation, _ALL_KINDS,
               ggml_type="q4_1"),
        Format("q4_0", LLAMA_CPP, 32, 18.0, lambda w: ggml.via_gguf(w, "Q4_0"), ggml.q8_0_activation, _ALL_KINDS,
               ggml_type="q4_0"),
        # 3.44 bits: what pays for finer units in a plan the size of a 4-bit format (llama.cpp's Q3_K_M / Q4_K_M
        # mixes). Multiplies with Q8_K activations.
        Format("q3_k", LLAMA_CPP, 256, 110.0, _library_only("q3_K"), ggml.q8_k_activation, _ALL_KINDS,
               ggml_type="q3_K", fallback="iq4_nl", native_only=True),
        # Fallbacks only (never offered on their own): what llama.cpp stores when a K-quant does not fit the row.
        Format("iq4_nl", LLAMA_CPP, 32, 18.0, _library_only("iq4_nl"), ggml.q8_0_activation, _ALL_KINDS,
               ggml_type="iq4_nl", native_only=True),
        Format("q5_0", LLAMA_CPP, 32, 22.0, lambda w: ggml.via_gguf(w, "Q5_0"), ggml.q8_0_activation, _ALL_KINDS,
               ggml_type="q5_0"),
        Format("f16", LLAMA_CPP, 1, 2.0, ggml.fp16, ggml.fp16, _ALL_KINDS, ggml_type="f16"),
    )
}  # fmt: skip
CANDIDATES = ("int8", "fp8", "fp8-block", "int4-g128", "mxfp4", "q8_0", "q6_k", "q5_1", "q4_k", "q4_1", "q4_0", "q3_k")
PRESETS = {
    "all": CANDIDATES,
    LLAMA_CPP: tuple(n for n in CANDIDATES if FORMATS[n].engine == LLAMA_CPP),
    VLLM: tuple(n for n in CANDIDATES if FORMATS[n].engine == VLLM),
}


def parse_formats(spec: str) -> tuple[str, ...]:
    """`all`, an engine name (`llama.cpp`, `vllm`) or a comma-separated list of format names, in CANDIDATES order."""
    from onboard.errors import InputError

    hint = f"use all, llama.cpp, vllm or some of {', '.join(CANDIDATES)}"
    names: list[str] = []
    for word in (w.strip().lower() for w in spec.split(",") if w.strip()):
        if word in PRESETS:
            names += PRESETS[word]
        elif word in CANDIDATES:
            names.append(word)
        else:
            raise InputError(f"--formats: unknown format {word!r}", hint)
    if not names:
        raise InputError("--formats: no format given", hint)
    return tuple(n for n in CANDIDATES if n in names)


def usable(names: tuple[str, ...]) -> tuple[tuple[str, ...], dict[str, str]]:
    """The formats this process can round exactly as the engine does, and why each other one is left out."""
    kept: list[str] = []
    dropped: dict[str, str] = {}
    for name in names:
        fmt = FORMATS[name]
        needed = [fmt, FORMATS[fmt.fallback]] if fmt.fallback else [fmt]
        missing = [
            f
            for f in needed
            if f.native_only and not ggml_native.supports(str(f.ggml_type), f.block, f.bytes_per_block)
        ]
        if missing:
            dropped[name] = (
                f"needs {' and '.join(f.name for f in missing)} {NEEDS_LIBRARY}; this process: {ggml_native.describe()}"
            )
        else:
            kept.append(name)
    return tuple(kept), dropped
