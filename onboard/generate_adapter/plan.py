"""ModelProfile -> AdapterPlan: which family template the adapter composes, and which features the block
library lacks (each becomes a kernel stub the adapter refuses to run without).

A feature is "lacking" when the profile shows something the family's adapter does not implement: a feature name
outside the family's list, a rope type or quantization the runtime cannot apply, a checkpoint tensor no weight
rule knows, or a config key the family does not have.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from onboard.blocks.rotary import ROPE_TYPES
from onboard.errors import InputError
from onboard.generate_adapter.archs import ARCHS, BASE_FIELDS, ArchSpec
from onboard.generate_adapter.weight_maps import CHECKPOINT_TENSORS, DROPPED
from onboard.profile import ModelProfile

# Features every adapter handles through config values alone. "plain_mlp" is also derived by inspect for MoE
# checkpoints whose experts are stored as w1/w2/w3 or stacked input_linear (no gate_proj name): the family's own
# blocks decide the MLP shape, so it never needs a stub on its own.
GENERIC_FEATURES = frozenset({"gqa", "mqa", "tied_embeddings", "interleaved_attention", "dense_first_layers"})
MOE_NAMING_FEATURES = frozenset({"plain_mlp"})

# Config keys that never change the forward pass (bookkeeping, generation, training, serving hints).
IGNORED_CONFIG_KEYS = frozenset(
    {
        "_name_or_path", "architectures", "auto_map", "bos_token_id", "eos_token_id", "pad_token_id", "torch_dtype",
        "dtype", "transformers_version", "use_cache", "initializer_range", "attention_dropout", "hidden_dropout",
        "embd_pdrop", "resid_pdrop", "output_router_logits", "router_aux_loss_coef", "router_z_loss_coef",
        "quantization_config", "rope_scaling", "rope_theta", "tokenizer_class", "model_type", "pretraining_tp",
        "max_window_layers", "use_sliding_window", "layer_types", "head_dim", "generation_config", "task_specific_params",
        "keys_to_ignore_at_inference", "num_nextn_predict_layers", "rope_parameters", "original_max_position_embeddings",
    }
)  # fmt: skip

_CONFIG_KEYS_LINE = re.compile(r"config keys not in [\w.-]+: (.*)")


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
    """The ArchSpec composed (the model_type itself, or its closest supported family)."""
    spec: ArchSpec
    stubs: tuple[KernelStub, ...] = ()

    @property
    def runnable(self) -> bool:
        return not self.stubs


def supported_model_types() -> tuple[str, ...]:
    """Families with an adapter template, sorted."""
    return tuple(sorted(ARCHS))


def op_name(text: str) -> str:
    """A kernel/op identifier from a tensor path or config key: 'self_attn.foo_gate' -> 'self_attn_foo_gate'."""
    name = re.sub(r"\W+", "_", text).strip("_").lower()
    return name if name and not name[0].isdigit() else f"op_{name}"


def plan_for_family(model_type: str) -> AdapterPlan:
    """The plan of the committed adapter of a supported family (no stubs)."""
    if model_type not in ARCHS:
        raise InputError(
            f"no adapter template for model_type {model_type!r}",
            f"supported: {', '.join(supported_model_types())}",
        )
    return AdapterPlan(model_type, model_type, ARCHS[model_type])


def _family(profile: ModelProfile) -> str:
    if profile.model_type in ARCHS:
        return profile.model_type
    if profile.closest_family in ARCHS:
        return profile.closest_family  # type: ignore[return-value]
    raise InputError(
        f"no adapter template for model_type {profile.model_type!r} (closest known family: "
        f"{profile.closest_family or 'none'})",
        f"adapters exist for: {', '.join(supported_model_types())}; add an ArchSpec in "
        "onboard/generate_adapter/archs.py and its weight map for a new family",
    )


def _feature_stubs(profile: ModelProfile, spec: ArchSpec) -> list[KernelStub]:
    out = []
    for feature in profile.features:
        kind, _, arg = feature.partition(":")
        if feature in GENERIC_FEATURES or feature in spec.features:
            continue
        if feature in MOE_NAMING_FEATURES and ("moe" in spec.features or not profile.tensor_templates):
            continue  # MoE expert naming, or a config-only profile (no tensor names to tell gated from plain)
        if kind == "rope":
            if arg not in ROPE_TYPES:
                out.append(KernelStub(op_name(f"rope_{arg}"), f"rope type {arg!r} is not in onboard.blocks.rotary"))
            continue
        if kind == "quantized":
            out.append(KernelStub(op_name(f"dequant_{arg}"), f"weights are quantized ({arg}); adapters load dense"))
            continue
        out.append(
            KernelStub(op_name(feature), f"feature {feature!r} is not implemented by the {spec.model_type} adapter")
        )
    return out


def _tensor_stubs(profile: ModelProfile, family: str) -> list[KernelStub]:
    known = [re.compile(p) for p in CHECKPOINT_TENSORS[family] + DROPPED]
    grouped: dict[str, list[str]] = {}
    for group in profile.tensor_templates:
        name = group.template.replace("{}", "0")
        if any(p.fullmatch(name) for p in known):
            continue
        module = re.sub(r"^(model\.)?(layers\.0\.)?", "", name).rsplit(".", 1)[0]
        grouped.setdefault(op_name(module), []).append(group.template)
    return [
        KernelStub(op, f"checkpoint tensors no block consumes: {', '.join(sorted(t))}") for op, t in grouped.items()
    ]


def _config_stubs(profile: ModelProfile, spec: ArchSpec) -> list[KernelStub]:
    # Keys the adapter reads (ModelArgs fields and their aliases) or that the family's code ignores are known.
    known = {name for name, _, _ in BASE_FIELDS + spec.fields} | set(spec.ignored_keys)
    known |= {alias for aliases in spec.aliases.values() for alias in aliases}
    out = []
    for line in profile.novelty:
        m = _CONFIG_KEYS_LINE.fullmatch(line)
        if m is None:
            continue
        keys = [k.strip() for k in m.group(1).replace("…", "").split(",") if k.strip()]
        for key in keys:
            if key not in IGNORED_CONFIG_KEYS and key not in known:
                out.append(KernelStub(op_name(key), f"config.json field {key!r} is not read by any block"))
    return out


def plan(profile: ModelProfile) -> AdapterPlan:
    """What the adapter for `profile` composes, and the kernel stubs it needs before it may run."""
    family = _family(profile)
    spec = ARCHS[family]
    merged: dict[str, list[str]] = {}
    for stub in _feature_stubs(profile, spec) + _tensor_stubs(profile, family) + _config_stubs(profile, spec):
        merged.setdefault(stub.op, []).append(stub.reason)
    stubs = tuple(KernelStub(op, "; ".join(dict.fromkeys(reasons))) for op, reasons in sorted(merged.items()))
    return AdapterPlan(profile.model_type, family, spec, stubs)
