"""`onboard convert gguf`: checkpoint folder -> GGUF through llama.cpp's converter, then (for a type the converter
does not write, or a plan) llama.cpp's quantizer with the plan's per-tensor types."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from onboard.engines import llamacpp
from onboard.errors import InputError
from onboard.findings import Finding, exit_code_for
from onboard.quantize.plan_file import read_plan

EXACT_INTERMEDIATE = {"bfloat16": "bf16", "float16": "f16"}
"""Stored dtype -> the converter type that keeps the weights exactly, before quantizing (anything else: f32)."""
CONTRADICTIONS = ("vocab-mismatch", "shape-mismatch")
"""inspect's findings of a config.json that its weights contradict."""


def convert_gguf(
    source: str, outtype: str | None, plan_file: Path | None, out: Path | None, pre_tokenizer: str | None
) -> tuple[dict[str, Any], int]:
    """(result, exit code): result = {stage, source, type, gguf, bytes, file_type, tensor_types, findings}.
    `outtype` None: Q8_0 under a plan (llamacpp.PLAN_BASE_TYPE), else F16."""
    from onboard.environment import resolve_local, slug

    outtype = outtype or (llamacpp.PLAN_BASE_TYPE if plan_file is not None else "f16")
    if plan_file is not None and outtype in llamacpp.UNQUANTIZED_TYPES:
        raise InputError(
            f"--type {outtype} with --plan: llama.cpp applies a plan's per-tensor types only under a "
            f"quantized file type; every layer's tensors would stay {outtype.upper()} (only the embedding's and "
            "the head's types apply)",
            f"use --type {llamacpp.PLAN_BASE_TYPE} (or leave --type out): the plan sets every unit's "
            "type, the base type only names the file",
        )
    folder = resolve_local(source)
    config = refuse_repository_code(folder)
    refuse_contradicted_config(folder)
    plan = read_plan(plan_file) if plan_file is not None else None  # a bad plan is named before any engine runs
    llamacpp.require()
    target = out or Path("onboarding") / slug(source) / f"{folder.name}-{outtype.upper()}.gguf"
    overrides = llamacpp.Overrides() if plan is None else llamacpp.plan_overrides(plan, folder)
    findings: list[Finding] = []
    written: Path | None = None
    if plan_file is not None or outtype not in llamacpp.CONVERTER_TYPES:  # quantized from an exact intermediate
        base = target.with_name(f".{target.stem}.base.gguf")
        intermediate = EXACT_INTERMEDIATE.get(str(config.get("dtype") or config.get("torch_dtype")), "f32")
        try:
            conversion = llamacpp.convert(folder, base, intermediate, pre_tokenizer=pre_tokenizer)
            findings += conversion.findings
            if conversion.path is not None:
                written = llamacpp.quantize(conversion.path, target, outtype, overrides)
        finally:
            base.unlink(missing_ok=True)
        if plan is not None and written is not None:
            findings += _as_planned(written, overrides, outtype)
            written = written if written.exists() else None
    else:
        conversion = llamacpp.convert(folder, target, outtype, pre_tokenizer=pre_tokenizer)
        findings += conversion.findings
        written = conversion.path
    result: dict[str, Any] = {
        "stage": "convert",
        "source": source,
        "type": outtype,
        "gguf": str(written) if written else None,
        "bytes": written.stat().st_size if written else None,
        "file_type": llamacpp.gguf_file_type(written)[1] if written else None,
        "tensor_types": [list(t) for t in overrides.tensor_types],
        "token_embedding_type": overrides.token_embedding_type,
        "output_tensor_type": overrides.output_tensor_type,
        "findings": [{k: v for k, v in asdict(f).items() if k != "members"} for f in findings],
    }
    return result, exit_code_for(findings)


def _as_planned(gguf: Path, overrides: llamacpp.Overrides, outtype: str) -> list[Finding]:
    """The GGUF stores every planned tensor as the plan rounded it, or it is removed: a file that is not the plan
    would be validated against the plan's budget as if it were."""
    wrong = llamacpp.types_not_as_planned(gguf, overrides)
    if not wrong:
        return []
    gguf.unlink()
    return [
        Finding(
            "gguf-plan-not-applied",
            "error",
            f"llama.cpp's quantizer did not apply the plan under --type {outtype}: {llamacpp.first_of(wrong)}; "
            f"{gguf.name} was removed",
            f"convert with --type {llamacpp.PLAN_BASE_TYPE}: llama.cpp leaves a tensor's type override unapplied "
            "under an unquantized file type, and (by its source) where the file type itself falls back on the "
            "tensor's rows",
            file=str(gguf),
        )
    ]


def refuse_contradicted_config(folder: Path) -> None:
    """llama.cpp's converter takes config.json at its word: a vocab_size of 10**30 has it pad the vocabulary up to
    that many tokens, wrong dims write a GGUF llama.cpp cannot load. What inspect finds contradicted is refused."""
    from onboard.inspect_checkpoint import inspect

    found = [f for f in inspect(str(folder)).findings if f.code in CONTRADICTIONS and f.severity in ("error", "fatal")]
    if found:
        raise InputError(
            f"{folder / 'config.json'}: the weights contradict it: {llamacpp.first_of([f.message for f in found])}",
            f"fix config.json to describe the weights (`onboard inspect {folder}` lists every "
            "contradiction), then convert",
        )


def refuse_repository_code(folder: Path) -> dict[str, Any]:
    """The folder's config.json, unless the checkpoint carries repository code (auto_map): llama.cpp's converter
    loads some tokenizers with trust_remote_code=True, which would run that code outside onboard's sandbox."""
    from onboard.reference import tokenizer_needs_code

    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{folder / 'config.json'}: unreadable ({exc})", "point SOURCE at a checkpoint") from exc
    if not isinstance(config, dict):
        config = {}
    if config.get("auto_map") or tokenizer_needs_code(folder):
        raise InputError(
            f"{folder.name} carries repository code (auto_map): llama.cpp's converter may run it without isolation",
            "convert a checkpoint whose architecture and tokenizer transformers "
            "implements; repository code only runs in onboard's sandbox",
        )
    return config
