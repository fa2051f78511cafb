"""ModelProfile -> AdapterPlan: the blocks the adapter composes, its weight map, and the features the block
library lacks (each becomes a kernel stub the adapter refuses to run without).

Every adapter is composed from a profile (compose.py): the checkpoint's own, or, for a profile without tensor names
(config.json only) of a committed family, the family's reference profile (families.py), with the stubs of the
checkpoint's own features and config keys.
"""

from __future__ import annotations

from dataclasses import dataclass

from onboard.errors import InputError
from onboard.generate_adapter.adapter_spec import AdapterSpec
from onboard.generate_adapter.compose import compose
from onboard.generate_adapter.compose_rules import Stub, config_key_stubs, feature_stubs, op_name
from onboard.generate_adapter.families import family_profile
from onboard.generate_adapter.weight_rule import WeightRule
from onboard.profile import ModelProfile


@dataclass(frozen=True)
class AdapterPlan:
    model_type: str
    """The adapter's name: adapters/<model_type>.py."""
    spec: AdapterSpec
    weight_rules: tuple[WeightRule, ...]
    """The inferred weight map."""
    stubs: tuple[Stub, ...] = ()
    """Features the block library lacks: each rendered as kernels/<op>.py + tests/kernels/test_<op>.py."""
    closest_family: str | None = None
    overrides: tuple[str, ...] = ()
    """Modelling-code facts of a known family that were applied (compose_knowledge.FAMILY_FACTS)."""

    @property
    def runnable(self) -> bool:
        return not self.stubs


def _merged(stubs: list[Stub]) -> tuple[Stub, ...]:
    merged: dict[str, list[str]] = {}
    for stub in stubs:
        merged.setdefault(op_name(stub.op), []).append(stub.reason)
    return tuple(Stub(op, "; ".join(dict.fromkeys(reasons))) for op, reasons in sorted(merged.items()))


def plan(profile: ModelProfile) -> AdapterPlan:
    """What the adapter for `profile` composes, and the kernel stubs it needs before it may run."""
    if not profile.config_keys:  # written before inspect recorded them: config stubs would be skipped silently
        raise InputError(
            f"{profile.source or 'profile'}: the profile lists no config keys (written by an older onboard inspect), "
            "so unread config fields cannot be checked",
            "re-run `onboard inspect --json` on the checkpoint and generate from the new profile",
        )
    reference = family_profile(profile.model_type) if not profile.tensor_templates else None
    composition = compose(reference or profile)
    stubs = list(composition.stubs)
    if reference is not None:  # config.json only: the family's adapter, and what this checkpoint adds to it
        stubs += feature_stubs(profile) + config_key_stubs(profile, composition.reads)
    return AdapterPlan(
        profile.model_type,
        composition.spec,
        composition.weight_map,
        _merged(stubs),
        (reference or profile).closest_family,
        composition.overrides,
    )
