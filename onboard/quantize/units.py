"""Units of a plan: the weights that share one format (a layer's attention, its MLP, its routed experts, its shared
experts, the token embedding, the head), found by parameter name in transformers models and generated adapters.

Routers (MoE gates), norms, biases and other 1-D tensors are never quantized by the engines: they stay in the model
dtype and count at 2 bytes per element. A tied head is one unit with the embedding ("embedding+head").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

LAYER = re.compile(r"\.(?:layers|h|blocks|layer)\.(\d+)\.")
ROUTER = re.compile(r"(?:^|\.)(?:gate|router|shared_expert_gate|shared_gate)\.weight$|\.mlp\.gate\.")
SHARED = re.compile(r"shared_expert|shared_experts|\.shared\.")
EXPERTS = re.compile(r"experts")
ATTENTION = re.compile(r"self_attn|\.attn\.|\.attention\.|cross_attn")
MLP = re.compile(r"\.mlp\.|feed_forward|\.ffn\.")
EMBEDDING = re.compile(r"embed_tokens|\.wte\.|word_embeddings|tok_embeddings")
HEAD = re.compile(r"(?:^|\.)(?:lm_head|output|embed_out)\.weight$")
KIND_ORDER = ("embedding", "attn", "mlp", "experts", "shared_experts", "head")


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
    units: dict[tuple[int | None, str], Unit] = {}
    kept = 0
    for name, param in model.named_parameters():  # shared (tied) parameters are listed once
        kind = classify(name, param.ndim, param.is_floating_point())
        if kind is None:
            kept += param.numel()
            continue
        match = LAYER.search(name)
        layer = int(match.group(1)) if match and kind not in ("embedding", "head") else None
        key = (layer, kind)
        if key not in units:
            units[key] = Unit(unit_name(layer, kind), layer, kind)
        units[key].tensors.append(Tensor(name, param, transposed.get(id(param), False)))
    embedding = units.get((None, "embedding"))
    if embedding is not None and _owners(model, embedding.tensors[0].param) > 1:
        embedding.name = "embedding+head"  # tied: the head multiplies by the same (quantized) matrix
    return sorted(units.values(), key=_order), kept


def classify(name: str, ndim: int, floating: bool = True) -> str | None:
    """The unit kind of a weight by its name (a checkpoint's or a loaded model's), None when it stays unquantized."""
    if not floating or ndim < 2 or name.endswith(".bias") or ROUTER.search(name):
        return None
    if EMBEDDING.search(name):
        return "embedding"
    if LAYER.search(name) is None:
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


def unit_name(layer: int | None, kind: str) -> str:
    return kind if layer is None else f"layer.{layer}.{kind}"


def _owners(model: Any, param: Any) -> int:
    """How many modules hold `param` as their weight (2 for a tied embedding and head)."""
    return sum(1 for m in model.modules() if getattr(m, "weight", None) is param)


def _order(unit: Unit) -> tuple[int, int]:
    if unit.kind == "embedding":
        return (-1, 0)
    if unit.kind == "head":
        return (1 << 30, 0)
    return (unit.layer if unit.layer is not None else 0, KIND_ORDER.index(unit.kind))
