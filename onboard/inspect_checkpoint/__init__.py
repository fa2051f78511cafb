"""Stage 1, inspect: config + safetensors headers (never the weights) → ModelProfile.

`inspect(source)` is the entry point; each concern lives in its own module:
source / hub (where files come from), safetensors_header + integrity (is the checkpoint intact),
architecture + layer_plan (what the model is), features, params, memory, config_lint, families (novelty),
remote_code (what the repo would execute: reported, never run).
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from onboard import __version__
from onboard.collector import paused
from onboard.errors import ConfigError
from onboard.findings import SEVERITIES, Finding, group_findings, info, warning
from onboard.inspect_checkpoint.architecture import analyze
from onboard.inspect_checkpoint.checkpoint_types import INDEX_FILE, RepoListing, SafetensorsHeader, TensorInfo
from onboard.inspect_checkpoint.config_lint import comparable_keys, lint_config
from onboard.inspect_checkpoint.config_view import ConfigView
from onboard.inspect_checkpoint.consistency import check_conv_channels, check_dtype, check_shapes, check_vocab
from onboard.inspect_checkpoint.families import catalog, family_buffers, known_model_types, novelty
from onboard.inspect_checkpoint.features import derive
from onboard.inspect_checkpoint.memory import Target, parse_target, plan_memory
from onboard.inspect_checkpoint.params import count_parameters
from onboard.inspect_checkpoint.registry import KNOWN_GAPS, VERIFIED
from onboard.inspect_checkpoint.remote_code import remote_code_findings
from onboard.inspect_checkpoint.tensor_index import TensorIndex
from onboard.names.config import spellings
from onboard.names.config_keys import MODEL_SECTIONS
from onboard.profile import Biases, ModelProfile, RemoteCode, TensorGroupStat, WeightsEstimate

__all__ = ["inspect", "profile_from_parts"]

DEFAULT_MAX_MODEL_LEN = 4096
# Fields the tensors decide (or that follow from them): with a fatal finding about the weights they would be guesses
# shown as facts, so the profile lists them in `unknown` instead.
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
ABOUT_WITHHELD = ("no-safetensors-headers",)  # findings that only describe a withheld field


@paused()  # reading a checkpoint allocates several objects per tensor, none in a cycle
def inspect(
    source: str,
    revision: str | None = None,
    target: str | None = None,
    max_model_len: int | None = None,
    kv_dtype: str | None = None,
    listing: RepoListing | None = None,
) -> ModelProfile:
    """Inspect a local folder or hub repo id. Problems are findings in the profile; unusable input raises.
    `listing`: the hub repo's listing made earlier in the run, so the repo is not listed twice."""
    from onboard.inspect_checkpoint.integrity import check_integrity
    from onboard.inspect_checkpoint.remote_code import find_remote_code
    from onboard.inspect_checkpoint.source import WEIGHT_SUFFIXES, open_source

    parsed_target = parse_target(target) if target else None
    src = open_source(source, revision, listing=listing)
    config = src.read_json("config.json")
    if config is None:
        raise ConfigError(
            f"{src.display}: no config.json",
            "a transformers checkpoint needs config.json next to its weights; is this the right folder or repo?",
        )
    shards = src.safetensors_files()  # sorted: tensors are grouped in the order writers number the shards
    headers = src.read_headers(shards) if shards else {}
    findings = list(src.findings) + check_integrity(src, headers)
    readable = [h for h in headers.values() if isinstance(h, SafetensorsHeader)]
    # No readable header at all (every listed shard missing or broken): sized like a metadata-only folder, not 0 B.
    tensors = TensorIndex.from_headers(readable) if readable else None
    remote = find_remote_code(src, config)
    profile = profile_from_parts(
        config,
        tensors,
        source=src.display,
        revision=src.revision,
        files=tuple(f.path for f in src.files),
        findings=findings,
        remote_code=remote,
        target=parsed_target,
        max_model_len=max_model_len,
        kv_dtype=kv_dtype,
        index=None if tensors is not None else src.index(),  # sizes only a checkpoint whose headers were unreadable
    )
    # Fatal findings first, repeats grouped; weight-derived fields withheld when the weights inspect reads (the shards
    # and the index; pickles or GGUF without shards) have a fatal finding.
    findings = sorted(group_findings(profile.findings), key=lambda f: SEVERITIES.index(f.severity))
    weights = {*shards, INDEX_FILE}
    unreadable = any(
        file in weights or (not shards and file and file.endswith(WEIGHT_SUFFIXES))
        for f in findings
        if f.severity == "fatal"
        for file in [f.file, *(m.file for m in f.members)]
    )
    if not unreadable:
        return msgspec.structs.replace(profile, findings=tuple(findings))
    kept = tuple(f for f in findings if f.code not in ABOUT_WITHHELD)
    return msgspec.structs.replace(profile, **WEIGHT_DERIVED, findings=kept, unknown=tuple(WEIGHT_DERIVED))  # type: ignore[arg-type]


def profile_from_parts(
    config: dict,
    tensors: TensorIndex | Mapping[str, TensorInfo] | None,
    *,
    source: str = "",
    revision: str | None = None,
    files: tuple[str, ...] = (),
    findings: list[Finding] | None = None,
    remote_code: RemoteCode | None = None,
    target: Target | None = None,
    max_model_len: int | None = None,
    kv_dtype: str | None = None,
    index: dict | None = None,
) -> ModelProfile:
    """Build the profile from an already-read config dict and tensor headers (None when no safetensors)."""
    if not isinstance(config, dict):
        raise ConfigError("config.json must hold a JSON object", "check the file is a transformers config")
    findings = list(findings or [])
    if tensors is not None and not isinstance(tensors, TensorIndex):
        tensors = TensorIndex.from_tensors(tensors)
    cv = ConfigView(config)
    try:
        facts, arch_findings = analyze(cv, tensors)
    except (TypeError, ValueError, IndexError, KeyError, AttributeError) as exc:
        # A field of an unexpected shape that the analysis does not guard yet: still a clean, named error.
        raise ConfigError(
            f"config.json has a field onboard cannot read ({type(exc).__name__}: {exc})",
            "check the config against the family's transformers config class",
        ) from exc
    findings += arch_findings
    dims = facts.dims
    mla = any(layer.attention == "mla" for layer in facts.layers)
    parameters = None
    weights_bytes: int | None = None
    weights_source, estimate = "unknown", None
    templates: dict[str, int] = {}
    shapes: dict[str, tuple[int, ...]] = {}
    if tensors is not None:
        parameters = count_parameters(tensors, facts.moe, family_buffers(cv.model_type))
        weights_bytes, weights_source = sum(g.nbytes for g in tensors.groups), "headers"
        for g in tensors.groups:
            templates[g.template] = templates.get(g.template, 0) + g.count
            shapes.setdefault(g.template, tuple(g.first_shape))
        findings += check_vocab(tensors, cv.int(*spellings("vocab_size")), dims.vocab_size)
        findings += check_shapes(tensors, dims, mla)
        findings += check_conv_channels(tensors)
    else:
        weights_bytes, weights_source, estimate, note = _weights_without_headers(config, index, facts.mtp_layers)
        findings.append(
            info(
                "no-safetensors-headers",
                f"no safetensors headers were read: {note}",
                "inspect the full repo (with its .safetensors files) for exact counts",
            )
        )
    config_dtype = cv.get("torch_dtype", "dtype")
    config_dtype = str(config_dtype) if config_dtype else None
    if tensors:
        findings += check_dtype(tensors, config_dtype)
    kv = kv_dtype or _default_kv_dtype(config_dtype)
    length = max_model_len or dims.max_position_embeddings or DEFAULT_MAX_MODEL_LEN
    memory = plan_memory(
        cv,
        dims,
        facts.layers,
        weights_bytes,
        kv,
        length,
        target,
        weights_source=weights_source,
        weights_estimate=estimate,
        quantization=facts.quantization,
        ssm=facts.ssm,
    )
    features = derive(facts)
    findings += lint_config(cv)
    keys = comparable_keys(cv)
    closest, differences = novelty(cv.model_type, features, facts.layers, set(templates), keys)
    closest_keys = catalog()[closest].config_keys if closest in catalog() else frozenset()
    findings += remote_code_findings(remote_code, natively_supported=cv.model_type in known_model_types())
    if cv.model_type in KNOWN_GAPS:
        gaps = KNOWN_GAPS[cv.model_type]
        findings.append(
            warning(
                "inspect-known-gap",
                f"onboard inspect is known to be wrong for {cv.model_type!r} on: "
                + "; ".join(f"{fact} ({why})" for fact, why in gaps.items()),
                "size these by hand (or from a real engine's allocation) before relying on them",
            )
        )
    elif cv.model_type not in VERIFIED:
        findings.append(
            info(
                "unverified-architecture",
                f"model_type {cv.model_type!r} is not among the architectures "
                "onboard inspect is verified on; this profile comes from generic rules",
                "check the per-layer plan and parameter counts by hand, then add a tiny checkpoint to "
                "tests/tiny/configs.py and the type to inspect_checkpoint/registry.py",
            )
        )
    archs = cv.get("architectures")
    return ModelProfile(
        source=source,
        revision=revision,
        model_type=cv.model_type,
        architectures=tuple(archs) if isinstance(archs, list) else (),
        **facts.profile_fields(),
        features=features,
        parameters=parameters,
        memory=memory,
        closest_family=closest,
        novelty=differences,
        remote_code=remote_code,
        files=files,
        tensor_templates=tuple(TensorGroupStat(k, v, shapes.get(k, ())) for k, v in sorted(templates.items())),
        config_dtype=config_dtype,
        findings=tuple(findings),
        tool_version=__version__,
        config_keys=_set_keys(cv),
        novel_config_keys=tuple(sorted(keys - closest_keys)),
    )


def _weights_without_headers(
    config: dict, index: dict | None, mtp_layers: int
) -> tuple[int | None, str, WeightsEstimate | None, str]:
    """Weight bytes when no header was read: the index's total_size, else an estimate from config, else unknown."""
    metadata = index.get("metadata") if isinstance(index, dict) else None
    total = metadata.get("total_size") if isinstance(metadata, dict) else None
    if isinstance(total, (int, float)) and not isinstance(total, bool) and total > 0:
        return int(total), "index", None, "weight bytes are the total_size of model.safetensors.index.json"
    from onboard.inspect_checkpoint.weight_estimate import estimate_weights  # only for headerless checkpoints

    estimate = estimate_weights(config, mtp_layers)
    if estimate.bytes is None:
        return None, "unknown", None, f"weight bytes unknown ({estimate.reason}); no fit claim is made"
    return estimate.bytes, "estimated", estimate.detail, f"weight bytes estimated from config.json: {estimate.reason}"


def _default_kv_dtype(config_dtype: str | None) -> str:
    name = (config_dtype or "bfloat16").replace("torch.", "")
    return name if name in ("float32", "float16", "bfloat16") else "bfloat16"


def _set_keys(cv: ConfigView) -> tuple[str, ...]:
    """The language model's config keys that hold a value (generate decides which it reads or may ignore)."""
    section = cv.text if cv.text_section else cv.raw
    keys = {k for k, v in section.items() if v is not None and not (k in MODEL_SECTIONS and isinstance(v, dict))}
    for name in MODEL_SECTIONS:  # DBRX's attn_config / ffn_config: their keys are the model's own
        if isinstance(section.get(name), dict):
            keys |= {k for k, v in section[name].items() if v is not None}
    return tuple(sorted(keys))
