"""ModelProfile -> AdapterPlan. A profile with tensor names is composed as it is (compose.py); a config.json-only
profile of a committed family gets the family's composition (families.py) plus the stubs of its own features and
config keys.
"""

from __future__ import annotations

import dataclasses

from onboard.errors import InputError
from onboard.generate_adapter.compose import compose
from onboard.generate_adapter.compose_rules import AdapterPlan, Stub, config_key_stubs, feature_stubs, op_name
from onboard.generate_adapter.families import family_profile
from onboard.profile import ModelProfile


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
    composed = compose(reference or profile)
    stubs = list(composed.stubs)
    if reference is not None:  # config.json only: the family's adapter, and what this checkpoint adds to it
        stubs += feature_stubs(profile) + config_key_stubs(profile, composed.reads)
    return dataclasses.replace(composed, model_type=profile.model_type, stubs=_merged(stubs))
