"""Unusable stays unknown: with a fatal finding about the weights, the fields they decide would be guesses shown as
facts, so the profile lists them in `unknown` instead.
"""

from __future__ import annotations

import msgspec

from onboard.findings import SEVERITIES, Finding, group_findings
from onboard.inspect_checkpoint.source import INDEX_FILE, WEIGHT_SUFFIXES
from onboard.profile import Biases, ModelProfile

# Fields the tensors decide (or that follow from them): unknown when the weights could not be read.
WEIGHT_DERIVED: dict[str, object] = {
    "layers": (),
    "features": (),
    "mlp_gated": None,
    "biases": Biases(),
    "attention_sinks": False,
    "parameters": None,
    "memory": None,
    "closest_family": None,
    "novelty": (),
    "tensor_templates": (),
    "novel_config_keys": (),
}
# Findings that only describe a withheld field (how the weight bytes were sized).
ABOUT_WITHHELD = ("no-safetensors-headers",)


def finish(profile: ModelProfile, shards: list[str]) -> ModelProfile:
    """Fatal findings first, repeats grouped, and the weight-derived fields withheld when the weights inspect reads
    (`shards` and the index; pickles or GGUF without shards) have a fatal finding."""
    findings = sorted(group_findings(profile.findings), key=lambda f: SEVERITIES.index(f.severity))
    if not weights_unreadable(findings, shards):
        return msgspec.structs.replace(profile, findings=tuple(findings))
    kept = tuple(f for f in findings if f.code not in ABOUT_WITHHELD)
    return msgspec.structs.replace(profile, **WEIGHT_DERIVED, findings=kept, unknown=tuple(WEIGHT_DERIVED))  # type: ignore[arg-type]


def weights_unreadable(findings: list[Finding], shards: list[str]) -> bool:
    weights = {*shards, INDEX_FILE}
    for f in findings:
        if f.severity != "fatal":
            continue
        for file in [f.file, *(m.file for m in f.members)]:
            if file in weights or (not shards and file and file.endswith(WEIGHT_SUFFIXES)):
                return True
    return False
