"""A composed adapter's weight map, inferred from the profile's tensor names and shapes (onboard/names/tensors.py):
`TensorRoles` classifies every tensor template, `WeightMapBuilder` turns roles into `WeightRule`s (plain data: the
loader applies them) with the op each layout needs. A mapping the names and shapes cannot decide raises
`AmbiguousWeights` naming the tensors: never a guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from onboard.errors import InputError
from onboard.inspect_checkpoint.tensor_names import language_model_name
from onboard.names.tensors import classify
from onboard.profile import ModelProfile

# How the sources of one rule become the runtime tensor (loader._combine applies them).
OPS = {
    "copy": "one source, as stored",
    "cat": "the sources' rows concatenated (fused qkv, gate_up)",
    "stack": "per expert `{e}`, the sources' rows concatenated, the experts stacked along a new dim 0",
    "transpose": "one source, its last two dims swapped (GPT-2 Conv1D weights, experts stored [E, in, out])",
    "deinterleave_heads": "rows grouped per KV head, [q heads of the group; k; v] (GPT-NeoX, Falcon, Bloom), "
    "reordered to [all q; all k; all v] by the owning attention's head counts",
    "squeeze": "one source, its leading size-1 dims dropped (ERNIE MoE's correction bias [1, E])",
    "zeros_if_absent": "a bias only some layers store: copied where stored, zeros (no bias) elsewhere",
    "grouped_rows": "the target part's rows of a source grouped per head (Qwen3-Next's in_proj_qkvz / in_proj_ba), "
    "as the owning module's grouped_rows(part) lists them",
    "codegen_qkv": "CodeGen's fused qkv, 4 row blocks of [q; v; k], reordered to [all q; all k; all v]",
    "cat_present": "cat of the sources stored and not dropped, the first required (Gemma 4's layers without v or k)",
    "fused_rows": "the target part's rows of a source holding the parts in turn (Lara-mini's in_proj [q|k|v|z|b|a]), "
    "as the owning module's fused_rows(part) lists them",
    "expert_rows": "2-D sources of every expert's rows in turn ([E x I, H], DBRX's w1 / v1), joined per expert",
    "expert_rows_transposed": "one such source of each expert's [I, H] down projection (DBRX's w2): [E, H, I]",
}


@dataclass(frozen=True)
class WeightRule:
    """`target` (runtime name) <- `sources` (checkpoint names, `{i}` the layer, `{e}` the expert) combined by `op`."""

    target: str
    sources: tuple[str, ...]
    op: str = "copy"


LAYER = "model.layers.{i}."
CONV1D_NAMES = ("c_attn", "c_proj", "c_fc")  # GPT-2's Conv1D modules: [in, out], the transpose of a Linear's


class AmbiguousWeights(InputError):
    """The tensor names and shapes allow more than one weight mapping."""


@dataclass(frozen=True)
class Found:
    """One tensor template with its role."""

    role: str
    template: str  # the profile template: `{}` for every number
    source: str  # the name pattern the loader reads: `{i}` for the layer, `{e}` for an expert / head index
    param: str | None
    part: str | None
    shape: tuple[int, ...]
    count: int = 0  # tensors of the template (a per-layer tensor: the layers that store it)


def template_pattern(template: str) -> str:
    """The regex of a profile template's tensor names (`{}` for any number), as DROPPED lists them."""
    return re.escape(template).replace(r"\{\}", r"\d+")


def templates(*found: Found | None) -> str:
    """The templates of the tensors found, for messages ('a, b'; the absent ones left out)."""
    return ", ".join(f.template for f in found if f is not None)


def _source(template: str, layer: re.Match[str] | None) -> str:
    if layer is None:
        return template
    rest = layer.group("rest").replace("{}", "{e}")
    return f"{layer.group('prefix')}{layer.group('container')}.{{i}}.{rest}"


class TensorRoles:
    """Every tensor template of a profile, by role; `unknown` lists the templates no pattern knows."""

    def __init__(self, profile: ModelProfile) -> None:
        self.found: dict[tuple[str, str | None, str | None], list[Found]] = {}
        self.unknown: list[str] = []
        self.dropped: list[str] = []
        self.layer_count = len(profile.layers)
        scales = set(profile.quantization.scale_tensors) if profile.quantization else set()
        for group in profile.tensor_templates:
            # A multimodal wrapper's language model under its text names, as the loader reads it; towers left out
            # (the loader counts them; generate reports image and audio inputs unchecked).
            template = language_model_name(group.template)
            if template is None:
                continue
            if template.rsplit(".", 1)[-1] in scales:
                continue  # quantization scales: the dequant_<method> stub stands for all of them
            role, m, layer = classify(template)
            if role is None:
                self.unknown.append(template)
                continue
            if role == "drop":
                self.dropped.append(template_pattern(template))
                continue
            groups = m.groupdict() if m is not None else {}
            suffix = template.rsplit(".", 1)[-1]
            param = groups.get("param") or (suffix if suffix in ("weight", "bias") else None)
            found = Found(
                role, template, _source(template, layer), param, groups.get("part"), tuple(group.shape), group.count
            )
            self.found.setdefault((role, found.param, found.part), []).append(found)

    def get(self, role: str, param: str | None = "weight", part: str | None = None) -> Found | None:
        """The one tensor with this role; AmbiguousWeights when two templates claim it. param "weight" also finds
        a role's suffix-less tensor (stacked experts, sinks)."""
        hits = self.found.get((role, param, part), [])
        if not hits and param == "weight":
            hits = self.found.get((role, None, part), [])
        if len(hits) > 1:
            raise AmbiguousWeights(
                f"tensors {', '.join(f.template for f in hits)} all look like {role}" + (f".{param}" if param else ""),
                "add a fact for this family to compose_knowledge.FAMILY_FACTS naming which one the block reads",
            )
        return hits[0] if hits else None

    def has(self, role: str) -> bool:
        return any(key[0] == role for key in self.found)

    def parts(self, role: str) -> list[Found]:
        return [
            f for (r, _, _), hits in sorted(self.found.items(), key=lambda kv: str(kv[0])) if r == role for f in hits
        ]

    def roles(self) -> set[str]:
        return {key[0] for key in self.found}


def orientation(found: Found, out_dim: int, in_dim: int) -> str:
    """copy (stored [out, in], a Linear), transpose (stored [in, out]), or either (square: the shape cannot tell)."""
    shape = found.shape[-2:]
    if out_dim == in_dim and shape == (out_dim, in_dim):
        return "either"
    if shape == (in_dim, out_dim):
        return "transpose"
    return "copy"  # [out, in], or a shape the loader will report against the config's dims


class WeightMapBuilder:
    """Collects the rules of one composed adapter. Conv1D orientation is decided once for all c_attn / c_proj /
    c_fc tensors from the first one whose shape tells (GPT-2 stores every one of them transposed)."""

    def __init__(self, roles: TensorRoles) -> None:
        self.roles = roles
        self.rules: list[WeightRule] = []
        self._conv1d: bool | None = None
        self.partial: list[str] = []  # bias templates only some layers store (zero in the others)
        self.by_name: set[str] = set()  # sources a block reads under their own name (no rule written)

    def add(self, target: str, sources: tuple[str, ...], op: str = "copy") -> None:
        if op == "copy" and sources == (target,):
            self.by_name.add(target)  # same name: the loader reads it without a rule
            return
        self.rules.append(WeightRule(target, sources, op))

    def reads(self, source: str) -> bool:
        """Does a block read the tensors `source` names (through a rule, or by their own name)?"""
        return source in self.by_name or any(source in rule.sources for rule in self.rules)

    def linear(self, target: str, found: Found, out_dim: int, in_dim: int) -> None:
        """A 2-D weight (and its bias) of a Linear or Conv1D module: copy or transpose."""
        op = orientation(found, out_dim, in_dim) if len(found.shape) == 2 else "copy"
        conv_name = found.template.rsplit(".", 2)[-2] in CONV1D_NAMES
        if op == "transpose" and conv_name:
            self._conv1d = True
        if op == "either":
            if conv_name and self._conv1d is None:
                raise AmbiguousWeights(
                    f"{found.template} {list(found.shape)} is square: Linear ([out, in]) or Conv1D ([in, out])?",
                    "no non-square c_attn / c_fc weight in the checkpoint tells; add a family fact (compose_knowledge.FAMILY_FACTS)",
                )
            op = "transpose" if conv_name and self._conv1d else "copy"
        self.add(f"{target}.weight", (found.source,), op)

    def bias(self, target: str, found: Found | None) -> bool:
        """The bias rule; a per-layer bias that only some layers store (GPT-NeoX-Japanese: the last layer's
        attention output) is zero where absent, which is exactly no bias."""
        if found is None:
            return False
        per_layer = found.template.count("{}") == 1 and "{i}" in found.source
        partial = per_layer and 0 < found.count < self.roles.layer_count
        self.add(f"{target}.bias", (found.source,), "zeros_if_absent" if partial else "copy")
        if partial:
            self.partial.append(f"{found.template} ({found.count} of {self.roles.layer_count} layers)")
        return True

    def fused_conv1d_first(self, founds: list[Found | None], dims: list[tuple[int, int]]) -> None:
        """Decide the Conv1D orientation from whichever tensor's shape tells (call before `linear`)."""
        for found, (out_dim, in_dim) in zip(founds, dims):
            if found is not None and found.template.rsplit(".", 2)[-2] in CONV1D_NAMES and len(found.shape) == 2:
                op = orientation(found, out_dim, in_dim)
                if op != "either":
                    self._conv1d = op == "transpose"
                    return

    def expert_stack(self, target: str, found: Found, rows: int, cols: int) -> None:
        """A stacked [E, rows, cols] expert tensor stored as is or as [E, cols, rows]."""
        inner = found.shape[1:]
        if rows == cols:
            raise AmbiguousWeights(
                f"{found.template} {list(found.shape)}: the two inner dims are equal ({rows}), so the shape cannot "
                "tell [experts, out, in] from [experts, in, out]",
                "add a family fact stating the layout (compose_knowledge.FAMILY_FACTS)",
            )
        op = "transpose" if inner == (cols, rows) else "copy"
        self.add(target, (found.source,), op)


def layer_target(name: str) -> str:
    return LAYER + name
