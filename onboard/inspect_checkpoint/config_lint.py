"""Config lint: every config.json key is used (ConfigView records reads), deliberately ignored (with a reason, in
onboard/names/config_keys.py), or reported: an unknown key is how a new rope variant or mixer option shows up.
"""

from __future__ import annotations

from onboard.findings import Finding, info, warning
from onboard.inspect_checkpoint.config_view import ConfigView
from onboard.names.config_keys import (
    IGNORED,
    KERNEL_FACTS,
    KNOWN_UNSUPPORTED,
    PLAIN_VALUES,
    STRUCTURAL_KEYS,
    training_only,
)


def wrapper_side(cv: ConfigView, section: str) -> bool:
    """A key at a multimodal wrapper's top level, beside its text config: the wrapper's own (the language model's
    forward on text reads its text config only; the tie flag is handled in config_view.tie_word_embeddings)."""
    return section == "" and cv.text_section is not None


def comparable_keys(cv: ConfigView) -> set[str]:
    """Config keys that describe the model (not bookkeeping) and hold a non-null value: what novelty compares."""
    out = set()
    for section, key in cv.all_keys():
        value = cv.value(section, key)
        ignored = key in IGNORED or training_only(key) or wrapper_side(cv, section)  # not the forward pass on text
        if not ignored and value is not None and not isinstance(value, dict):
            out.add(key)
    return out


def lint_config(cv: ConfigView) -> list[Finding]:
    findings: list[Finding] = []
    wrapper_keys: list[str] = []
    for section, key in cv.all_keys():
        where = f"{section}.{key}" if section else key
        if key in cv.used or key in IGNORED or key in STRUCTURAL_KEYS or training_only(key):
            continue
        value = cv.value(section, key)
        if key in KERNEL_FACTS and not wrapper_side(cv, section):
            if value not in PLAIN_VALUES.get(key, (None, False, [], {})):
                findings.append(
                    info(
                        "config-kernel-fact",
                        f"{where} = {value!r}: {KERNEL_FACTS[key]}",
                        "generated adapters apply it or refuse a value their blocks cannot express; a serving "
                        "engine's kernels must apply it too: validate compares their outputs",
                        file="config.json",
                    )
                )
            continue
        if value is None or value is False or value == [] or value == {}:
            continue  # an absent-valued option changes nothing
        if wrapper_side(cv, section):
            if not key.endswith(("_config", "_token", "_token_id", "_token_index")):
                wrapper_keys.append(key)
            continue
        if key in KNOWN_UNSUPPORTED:
            findings.append(
                warning(
                    "config-unmodelled-field",
                    f"{where} is set: {KNOWN_UNSUPPORTED[key]}; onboard's block library does not model it yet",
                    "make sure the serving kernels implement it; the adapter will need a kernel stub",
                    file="config.json",
                )
            )
            continue
        if section == "" and key in ("quantization_config", "text_config", "vision_config", "audio_config"):
            continue
        if key.endswith(("_config", "_token", "_token_id", "_token_index")) and section == "":
            continue  # nested tower configs and special tokens belong to other checks
        findings.append(
            warning(
                "config-unknown-field",
                f"unknown field {where}: check whether it changes the forward pass",
                "model it in onboard/inspect_checkpoint (architecture.py) or list it in "
                "onboard/names/config_keys.py (IGNORED) with a reason",
                file="config.json",
            )
        )
    for name, read in cv.conflicts.items():
        shown = f"{cv.where(read)} = {cv.get(read)!r}" if cv.has(read) else read
        findings.append(
            info(
                "config-alias-conflict",
                f"{cv.where(name)} = {cv.get(name)!r} and {shown} spell one fact with different values; onboard "
                f"reads {cv.where(read)}",
                "generated adapters read it as transformers' config class resolves it; if one spelling is stale, "
                "remove it from config.json so engines cannot pick the other",
                file="config.json",
            )
        )
    if wrapper_keys:
        findings.append(
            info(
                "wrapper-config-fields",
                f"the multimodal wrapper's own keys (outside {cv.text_section}): {', '.join(wrapper_keys)}; the "
                "language model's forward on text does not read them, and adapters serve the language model",
                "they shape image / audio inputs: check them when validating those inputs on the serving engine",
                file="config.json",
            )
        )
    return findings
