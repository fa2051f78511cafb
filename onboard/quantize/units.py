"""Units of a plan: the weights that share one format, by parameter name (transformers models and generated adapters).

Per layer and block (attention, MLP, routed or shared experts) two units: the matmuls reading the block's input
(`layer.3.attn.qkv`), which share its activation rounding, and the one writing its output (`layer.3.attn.o`); then
the embedding and the head (one unit when tied). Routers, norms and biases stay in the model dtype, as engines do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from onboard.inspect_checkpoint.tensor_names import tower_of
from onboard.names.tensors import LAYER_INDEX

ROUTER = re.compile(r"(?:^|\.)(?:gate|router|shared_expert_gate|shared_gate)\.weight$|\.mlp\.gate\.")
SHARED = re.compile(r"shared_expert|shared_experts|\.shared\.")
EXPERTS = re.compile(r"experts")
ATTENTION = re.compile(r"self_attn|\.attn\.|\.attention\.|cross_attn")
MLP = re.compile(r"\.mlp\.|feed_forward|\.ffn\.")
EMBEDDING = re.compile(r"embed_tokens|\.wte\.|word_embeddings|tok_embeddings")
HEAD = re.compile(r"(?:^|\.)(?:lm_head|output|embed_out)\.weight$")
KIND_ORDER = ("embedding", "attn", "mlp", "experts", "shared_experts", "head")
OUTPUT_PROJECTION = re.compile(r"^(?:o_proj|out_proj|dense|c_proj|down_proj|fc2|w2|wo|dense_4h_to_h|experts_down)$")
"""The matmul that writes a block's output, by its own name (`component`)."""
PARTS = {"attn": ("qkv", "o"), "mlp": ("gate_up", "down"), "experts": ("gate_up", "down"),
         "shared_experts": ("gate_up", "down")}  # fmt: skip
"""Per block kind: (the unit of the matmuls reading the block's input, the unit of the one writing its output)."""


@dataclass
class Tensor:
    name: str
    param: Any
    """The torch Parameter (shared when tied)."""
    transposed: bool = False
    """Stored [experts, in, out] (transformers' is_transposed experts): the input dimension is -2, not -1."""

    @property
    def shape(self) -> tuple[int, ...]:
        """[..., out, in]: the layout the formats quantize along."""
        shape = tuple(self.param.shape)
        return (*shape[:-2], shape[-1], shape[-2]) if self.transposed else shape


@dataclass(eq=False)  # identity: units key the format assignments
class Unit:
    name: str
    layer: int | None
    kind: str
    tensors: list[Tensor] = field(default_factory=list)
    part: str | None = None
    """`PARTS[kind]` within a layer's block; None for the embedding and the head."""

    @property
    def elements(self) -> int:
        return sum(t.param.numel() for t in self.tensors)

    def applies(self, fmt: Any) -> bool:
        """`fmt` (a Format) can hold every tensor of this unit and the engine quantizes this kind."""
        return self.kind in fmt.kinds and all(fmt.applies(t.shape) for t in self.tensors)

    def nbytes(self, fmt: Any) -> float:
        return sum(fmt.nbytes(t.shape) for t in self.tensors)


def find_units(model: Any) -> tuple[list[Unit], int]:
    """(units in forward order, elements left in the model dtype) of a torch model."""
    transposed = {
        id(p): bool(getattr(m, "is_transposed", False))
        for m in model.modules()
        for p in m.parameters(recurse=False)
        if p.ndim == 3
    }
    units: dict[tuple[int | None, str, str | None], Unit] = {}
    kept = 0
    for name, param in model.named_parameters():  # shared (tied) parameters are listed once
        key = unit_key(name, param.ndim, param.is_floating_point())
        if key is None:
            kept += param.numel()
            continue
        if key not in units:
            units[key] = Unit(unit_name(*key), key[0], key[1], part=key[2])
        units[key].tensors.append(Tensor(name, param, transposed.get(id(param), False)))
    embedding = units.get((None, "embedding", None))
    if embedding is not None and _owners(model, embedding.tensors[0].param) > 1:
        embedding.name = "embedding+head"  # tied: the head multiplies by the same (quantized) matrix
    return sorted(units.values(), key=_order), kept


def unit_key(name: str, ndim: int, floating: bool = True) -> tuple[int | None, str, str | None] | None:
    """(layer, kind, part) of the unit a weight belongs to, by its name (a checkpoint's or a loaded model's); None
    when it stays unquantized. A multimodal wrapper's towers stay in the model dtype, as engines keep them: the plan
    covers the language model, whose outputs it measures."""
    if tower_of(name) is not None:
        return None
    kind = classify(name, ndim, floating)
    if kind is None:
        return None
    match = LAYER_INDEX.search(name)
    layer = int(match.group(1)) if match and kind not in ("embedding", "head") else None
    return layer, kind, part(name, kind)


def classify(name: str, ndim: int, floating: bool = True) -> str | None:
    """The unit kind of a weight by its name, None when it stays unquantized."""
    if not floating or ndim < 2 or name.endswith(".bias") or ROUTER.search(name):
        return None
    if EMBEDDING.search(name):
        return "embedding"
    if LAYER_INDEX.search(name) is None:
        return "head" if HEAD.search(name) else None
    if SHARED.search(name):
        return "shared_experts"
    if EXPERTS.search(name):
        return "experts"
    if ATTENTION.search(name):
        return "attn"
    if MLP.search(name):
        return "mlp"
    return None


def part(name: str, kind: str) -> str | None:
    """The unit within its block a weight belongs to (`PARTS[kind]`), by its matmul's name; None outside blocks."""
    if kind not in PARTS:
        return None
    return PARTS[kind][1 if OUTPUT_PROJECTION.match(component(name)) else 0]


def component(name: str) -> str:
    """The matmul's own name: the last name component before `.weight` (before an expert's index)."""
    parts = name.removesuffix(".weight").split(".")
    return parts[-1] if not parts[-1].isdigit() else parts[-2]


def unit_name(layer: int | None, kind: str, piece: str | None = None) -> str:
    base = kind if layer is None else f"layer.{layer}.{kind}"
    return base if piece is None else f"{base}.{piece}"


def _owners(model: Any, param: Any) -> int:
    """How many modules hold `param` as their weight (2 for a tied embedding and head)."""
    return sum(1 for m in model.modules() if getattr(m, "weight", None) is param)


def _order(unit: Unit) -> tuple[int, int, int]:
    if unit.kind == "embedding":
        return (-1, 0, 0)
    if unit.kind == "head":
        return (1 << 30, 0, 0)
    rank = PARTS[unit.kind].index(unit.part) if unit.part in PARTS.get(unit.kind, ()) else 0
    return (unit.layer if unit.layer is not None else 0, KIND_ORDER.index(unit.kind), rank)
