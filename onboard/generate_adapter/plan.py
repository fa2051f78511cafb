"""ModelProfile -> AdapterPlan: the blocks the adapter composes, its weight map, and the features the block
library lacks (each becomes a kernel stub the adapter refuses to run without).

A model_type with a hand-written ArchSpec (archs.py) uses it: the override for families that really differ. Any
other model_type is composed from the profile alone (compose.py): per-layer plan, features, tensor roles.

For an ArchSpec family a feature is "lacking" when the profile shows something its adapter does not implement: a
feature outside the family's list, a rope type or quantization the runtime cannot apply, a checkpoint tensor no
weight rule knows, or a config key the family does not have (inspect's structured `novel_config_keys`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from onboard.errors import InputError
from onboard.generate_adapter.archs import ARCHS, BASE_FIELDS, ArchSpec
from onboard.generate_adapter.compose import compose
from onboard.generate_adapter.compose_knowledge import IGNORED_CONFIG_KEYS, ROPE_TYPE_NAMES
from onboard.generate_adapter.compose_rules import op_name
from onboard.generate_adapter.weight_maps import CHECKPOINT_TENSORS, DROPPED, WEIGHT_MAPS
from onboard.generate_adapter.weight_rule import WeightRule
from onboard.inspect_checkpoint.tensor_names import language_model_name
from onboard.profile import ModelProfile, quantized_feature, rope_feature

# Features every adapter handles through config values alone. "plain_mlp" is also derived by inspect for MoE
# checkpoints whose experts are stored as w1/w2/w3 or stacked input_linear (no gate_proj name): the family's own
# blocks decide the MLP shape, so it never needs a stub on its own.
# "multimodal": an adapter serves a wrapper's language model (the loader reads it under its text names and leaves the
# towers out); generate reports the towers' inputs as unverified (generate_adapter.tower_check).
GENERIC_FEATURES = frozenset({"gqa", "mqa", "tied_embeddings", "interleaved_attention", "dense_first_layers",
                              "multimodal"})  # fmt: skip
MOE_NAMING_FEATURES = frozenset({"plain_mlp"})


@dataclass(frozen=True)
class KernelStub:
    """A feature the block library lacks: rendered as kernels/<op>.py + tests/kernels/test_<op>.py."""

    op: str
    reason: str


@dataclass(frozen=True)
class AdapterPlan:
    model_type: str
    """The adapter's name: adapters/<model_type>.py."""
    family: str
    """The ArchSpec rendered: the model_type's own, or "composed" (built from the profile by compose.py)."""
    spec: ArchSpec
    stubs: tuple[KernelStub, ...] = ()
    weight_map: tuple[WeightRule, ...] | None = None
    """Composed plans: the inferred weight map (None: the family's table in weight_maps.py)."""
    closest_family: str | None = None
    overrides: tuple[str, ...] = ()
    """Composed plans: modelling-code facts of a known family that were applied (compose_knowledge.FAMILY_FACTS)."""

    @property
    def runnable(self) -> bool:
        return not self.stubs

    @property
    def composed(self) -> bool:
        return self.family == COMPOSED

    @property
    def weight_rules(self) -> tuple[WeightRule, ...]:
        return self.weight_map if self.weight_map is not None else WEIGHT_MAPS[self.family]


COMPOSED = "composed"


def supported_model_types() -> tuple[str, ...]:
    """Families with an adapter template, sorted."""
    return tuple(sorted(ARCHS))


def plan_for_family(model_type: str) -> AdapterPlan:
    """The plan of the committed adapter of a supported family (no stubs)."""
    if model_type not in ARCHS:
        raise InputError(
            f"no adapter template for model_type {model_type!r}",
            f"supported: {', '.join(supported_model_types())}",
        )
    return AdapterPlan(model_type, model_type, ARCHS[model_type])


def _feature_stubs(profile: ModelProfile, spec: ArchSpec) -> list[KernelStub]:
    out = []
    # The rope type and the quantization come from the profile's typed fields, never parsed from feature strings.
    rope = rope_feature(profile.rope.type) if profile.rope else None
    quantized = quantized_feature(profile.quantization.method) if profile.quantization else None
    features = list(profile.features)
    if quantized and quantized not in features:
        # A config fact (quantization_config), kept when inspect withholds the tensor-derived features (weights
        # missing or unreadable): the adapter still needs the dequant stub.
        features.append(quantized)
    for feature in features:
        if feature in GENERIC_FEATURES or feature in spec.features:
            continue
        if feature in MOE_NAMING_FEATURES and ("moe" in spec.features or not profile.tensor_templates):
            continue  # MoE expert naming, or a config-only profile (no tensor names to tell gated from plain)
        if profile.rope and feature == rope:
            if (kind := profile.rope.type) not in ROPE_TYPE_NAMES:
                out.append(KernelStub(op_name(f"rope_{kind}"), f"rope type {kind!r} is not in onboard.blocks.rotary"))
            continue
        if profile.quantization and feature == quantized:
            method = profile.quantization.method
            out.append(
                KernelStub(op_name(f"dequant_{method}"), f"weights are quantized ({method}); adapters load dense")
            )
            continue
        out.append(
            KernelStub(op_name(feature), f"feature {feature!r} is not implemented by the {spec.model_type} adapter")
        )
    return out


def _tensor_stubs(profile: ModelProfile, family: str) -> list[KernelStub]:
    known = [re.compile(p) for p in CHECKPOINT_TENSORS[family] + DROPPED]
    grouped: dict[str, list[str]] = {}
    for group in profile.tensor_templates:
        template = language_model_name(group.template)  # as the loader reads a multimodal wrapper's language model
        if template is None:
            continue  # a vision / audio tower: not served by a text adapter (generate_adapter.tower_check)
        name = template.replace("{}", "0")
        if any(p.fullmatch(name) for p in known):
            continue
        module = re.sub(r"^(model\.)?(layers\.0\.)?", "", name).rsplit(".", 1)[0]
        grouped.setdefault(op_name(module), []).append(template)
    return [
        KernelStub(op, f"checkpoint tensors no block consumes: {', '.join(sorted(t))}") for op, t in grouped.items()
    ]


def _config_stubs(profile: ModelProfile, spec: ArchSpec) -> list[KernelStub]:
    # Keys the adapter reads (ModelArgs fields and their aliases) or that the family's code ignores are known.
    known = {name for name, _, _ in BASE_FIELDS + spec.fields} | set(spec.ignored_keys)
    known |= {alias for aliases in spec.aliases.values() for alias in aliases}
    return [
        KernelStub(op_name(key), f"config.json field {key!r} is not read by any block")
        for key in profile.novel_config_keys
        if key not in IGNORED_CONFIG_KEYS and key not in known
    ]


def _merged(stubs: list[KernelStub]) -> tuple[KernelStub, ...]:
    merged: dict[str, list[str]] = {}
    for stub in stubs:
        merged.setdefault(stub.op, []).append(stub.reason)
    return tuple(KernelStub(op, "; ".join(dict.fromkeys(reasons))) for op, reasons in sorted(merged.items()))


def plan(profile: ModelProfile, compose_only: bool = False) -> AdapterPlan:
    """What the adapter for `profile` composes, and the kernel stubs it needs before it may run.

    compose_only: ignore a hand-written ArchSpec for the model_type (to check that composition alone reproduces
    a registered family)."""
    if not profile.config_keys:  # written before inspect recorded them: config stubs would be skipped silently
        raise InputError(
            f"{profile.source or 'profile'}: the profile lists no config keys (written by an older onboard inspect), "
            "so unread config fields cannot be checked",
            "re-run `onboard inspect --json` on the checkpoint and generate from the new profile",
        )
    family = profile.model_type
    if family in ARCHS and not compose_only:
        spec = ARCHS[family]
        stubs = _feature_stubs(profile, spec) + _tensor_stubs(profile, family) + _config_stubs(profile, spec)
        return AdapterPlan(profile.model_type, family, spec, _merged(stubs), closest_family=family)
    composition = compose(profile)
    stubs = [KernelStub(op_name(s.op), s.reason) for s in composition.stubs]
    return AdapterPlan(profile.model_type, COMPOSED, composition.spec, _merged(stubs), composition.weight_map,
                       profile.closest_family, composition.overrides)  # fmt: skip
