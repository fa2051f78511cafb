"""Engine-ready forms of a plan, written next to quantize-plan.json: `llama-quantize.sh` (an explicit
`--tensor-type` for every quantizable tensor, its effective type, so llama.cpp's own mixture rules never decide one)
and `llmcompressor-recipe.yaml` (a config group per vLLM format, `ignore` for what stays in the model dtype). Units
given a format the engine cannot serve are listed as `unsupported` for that engine, never dropped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from onboard.inspect_checkpoint.tensor_names import lm_prefix, strip_lm_prefix
from onboard.quantize.formats import BF16, FORMATS, LLAMA_CPP, VLLM
from onboard.quantize.units import component, unit_key, unit_name

# Last name component (per unit kind) -> GGUF tensor base names (llama.cpp's tensor_mapping.py conventions).
GGUF_NAMES: dict[str, dict[str, tuple[str, ...]]] = {
    "attn": {
        "q_proj": ("attn_q",), "k_proj": ("attn_k",), "v_proj": ("attn_v",), "o_proj": ("attn_output",),
        "qkv_proj": ("attn_q", "attn_k", "attn_v", "attn_qkv"), "query_key_value": ("attn_qkv",),
        "c_attn": ("attn_qkv",), "c_proj": ("attn_output",), "dense": ("attn_output",), "out_proj": ("attn_output",),
        "q_a_proj": ("attn_q_a",), "q_b_proj": ("attn_q_b",), "kv_a_proj_with_mqa": ("attn_kv_a_mqa",),
        "kv_b_proj": ("attn_kv_b", "attn_k_b", "attn_v_b"),
    },
    "mlp": {
        "gate_proj": ("ffn_gate",), "up_proj": ("ffn_up",), "down_proj": ("ffn_down",),
        "gate_up_proj": ("ffn_gate", "ffn_up"), "c_fc": ("ffn_up",), "c_proj": ("ffn_down",),
        "fc1": ("ffn_up",), "fc2": ("ffn_down",), "dense_h_to_4h": ("ffn_up",), "dense_4h_to_h": ("ffn_down",),
    },
    "experts": {
        "gate_up_proj": ("ffn_gate_exps", "ffn_up_exps", "ffn_gate_up_exps"), "down_proj": ("ffn_down_exps",),
        "gate_proj": ("ffn_gate_exps",), "up_proj": ("ffn_up_exps",),
        "experts_gate_up": ("ffn_gate_exps", "ffn_up_exps", "ffn_gate_up_exps"), "experts_down": ("ffn_down_exps",),
        "w1": ("ffn_gate_exps",), "w3": ("ffn_up_exps",), "w2": ("ffn_down_exps",),
    },
    "shared_experts": {
        "gate_proj": ("ffn_gate_shexp",), "up_proj": ("ffn_up_shexp",), "down_proj": ("ffn_down_shexp",),
        "gate_up_proj": ("ffn_gate_shexp", "ffn_up_shexp"),
    },
}  # fmt: skip
VLLM_SCHEMES: dict[str, tuple[str, str | None]] = {
    "int8": ("{num_bits: 8, type: int, symmetric: true, strategy: channel}",
             "{num_bits: 8, type: int, symmetric: true, strategy: token, dynamic: true}"),
    "fp8": ("{num_bits: 8, type: float, symmetric: true, strategy: tensor}",
            "{num_bits: 8, type: float, symmetric: true, strategy: tensor, dynamic: true}"),
    "fp8-block": ("{num_bits: 8, type: float, symmetric: true, strategy: block, block_structure: [128, 128]}",
                  "{num_bits: 8, type: float, symmetric: true, strategy: group, group_size: 128, dynamic: true}"),
    "int4-g128": ("{num_bits: 4, type: int, symmetric: false, strategy: group, group_size: 128}", None),
}  # fmt: skip
ROUTERS = (r"re:.*mlp\.gate$", r"re:.*shared_expert_gate$")
Shaped = tuple[str, tuple[int, ...]]
"""A checkpoint tensor's (name, shape)."""


@dataclass
class EngineForm:
    engine: str
    text: str
    unsupported: list[str] = field(default_factory=list)
    """Units whose planned format this engine cannot serve (they would run in the model dtype there)."""
    unmapped: list[str] = field(default_factory=list)
    """Checkpoint tensors with no known engine name (nothing written for them)."""


def checkpoint_tensors(folder: Path) -> list[Shaped]:
    """(name, shape) of every tensor in the checkpoint's safetensors files, from their headers."""
    from safetensors import safe_open

    found = []
    for file in sorted(folder.glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as handle:
            found += [(name, tuple(handle.get_slice(name).get_shape())) for name in handle.keys()]
    return found


def tensors_by_unit(tensors: Sequence[Shaped]) -> dict[str, list[Shaped]]:
    """Checkpoint tensors grouped by plan unit (`embedding`, `layer.3.attn.qkv`, `layer.3.mlp.down`, `head`, ...)."""
    grouped: dict[str, list[Shaped]] = {}
    for name, shape in tensors:
        key = unit_key(name, len(shape))
        if key is not None:
            grouped.setdefault(unit_name(*key), []).append((name, shape))
    return grouped


def llama_cpp(plan: Mapping[str, str], units: Mapping[str, list[Shaped]], source: str) -> EngineForm:
    """`plan`: unit name -> format name; `units`: checkpoint tensors per unit (tensors_by_unit)."""
    form = EngineForm(LLAMA_CPP, "")
    args: list[str] = []
    for unit, fmt_name in plan.items():
        fmt = FORMATS[fmt_name]
        if fmt.engine not in (LLAMA_CPP, "any"):
            form.unsupported.append(unit)
            continue
        key = "embedding" if unit.startswith("embedding") else unit
        tensors = units.get(key, [])
        if unit.startswith("embedding") or unit == "head":
            flag = "--token-embedding-type" if unit.startswith("embedding") else "--output-tensor-type"
            types = {fmt.resolve(shape).ggml_type for _, shape in tensors} or {fmt.ggml_type}
            args.append(f"{flag} {sorted(types)[0]}")
            continue
        _, layer, kind = unit.split(".")[:3]
        by_type: dict[str, set[str]] = {}
        for name, shape in tensors:
            names = GGUF_NAMES.get(kind, {}).get(component(name))
            if not names:
                form.unmapped.append(name)
                continue
            by_type.setdefault(str(fmt.resolve(shape).ggml_type), set()).update(names)
        for ggml_type, names in sorted(by_type.items()):
            pattern = rf"blk\.{layer}\.(?:{'|'.join(sorted(names))})\.weight"
            args.append(f"--tensor-type '{pattern}={ggml_type}'")
    lines = [
        "#!/bin/sh",
        f"# Generated by `onboard quantize-plan` for {source}: llama.cpp with the plan's per-tensor types.",
        "# Convert once, keeping bf16 (the units the plan keeps are then exact):",
        f"#   python convert_hf_to_gguf.py {source} --outtype bf16 --outfile model-bf16.gguf",
        "# Every quantizable tensor gets an explicit type below; the base type (Q8_0) only names the file type.",
        "set -e",
        "llama-quantize \\",
        *(f"  {a} \\" for a in args),
        '  "${1:-model-bf16.gguf}" "${2:-model-plan.gguf}" Q8_0',
    ]
    form.text = "\n".join(lines) + "\n"
    return form


def _module_regex(names: Sequence[str]) -> str:
    modules = sorted({_module_pattern(n.removesuffix(".weight")) for n in names})
    return "re:^(?:" + "|".join(modules) + ")$"


def _module_pattern(module: str) -> str:
    """The module's name as a regex; a multimodal wrapper's language-model module under either layout (transformers
    5 loads `language_model.model.layers.0.x` as `model.language_model.layers.0.x`)."""
    prefix = lm_prefix(module)
    if prefix is None:
        return re.escape(module)
    head = next(part for part in prefix.split(".") if part and part != "model")
    rest = strip_lm_prefix(module).removeprefix("model.")
    return rf"(?:(?:model\.)?{re.escape(head)}\.(?:model\.)?)?{re.escape(rest)}"


def llm_compressor(plan: Mapping[str, str], units: Mapping[str, list[Shaped]], source: str) -> EngineForm:
    form = EngineForm(VLLM, "")
    groups: dict[str, list[str]] = {}
    ignore = list(ROUTERS)
    head_planned = False
    for unit, fmt_name in plan.items():
        names = [n for n, _ in units.get("embedding" if unit.startswith("embedding") else unit, [])]
        if unit.startswith("embedding"):
            if fmt_name != BF16:
                form.unsupported.append(unit)  # vLLM keeps the token embedding (and a tied head) unquantized
            continue
        if fmt_name in VLLM_SCHEMES:
            groups.setdefault(fmt_name, []).extend(names)
            head_planned = head_planned or unit == "head"
            continue
        if fmt_name != BF16:
            form.unsupported.append(unit)
        if names and unit != "head":
            ignore.append(_module_regex(names))
    if not head_planned:
        ignore.insert(0, "lm_head")
    lines = [
        f"# Generated by `onboard quantize-plan` for {source}: the plan's vLLM formats as an llm-compressor recipe.",
        *(
            [f"# Not expressible for vLLM (kept in the model dtype here): {', '.join(form.unsupported)}"]
            if form.unsupported
            else []
        ),
        "quant_stage:",
        "  quant_modifiers:",
        "    QuantizationModifier:",
        "      ignore:",
        *(f"        - '{i}'" for i in ignore),
        "      config_groups:" if groups else "      config_groups: {}",
    ]
    for number, (fmt_name, names) in enumerate(sorted(groups.items())):
        weights, activations = VLLM_SCHEMES[fmt_name]
        lines += [
            f"        group_{number}:  # {fmt_name}",
            f"          targets: ['{_module_regex(names)}']",
            f"          weights: {weights}",
        ]
        if activations:
            lines.append(f"          input_activations: {activations}")
    form.text = "\n".join(lines) + "\n"
    return form


ENGINE_FILES = {LLAMA_CPP: "llama-quantize.sh", VLLM: "llmcompressor-recipe.yaml"}


def write_files(out: Path, detail: dict[str, Any], folder: Path, source: str) -> list[Path]:
    """quantize-plan.json and the engine files into `out` (each written atomically); `detail` gains `engines`."""
    from onboard.fsutil import atomic_write, atomic_write_json
    from onboard.quantize.plan_file import PLAN_FILE

    by_unit = tensors_by_unit(checkpoint_tensors(folder))
    plan = {u["unit"]: u["format"] for u in detail["units"]}
    forms = (llama_cpp(plan, by_unit, source), llm_compressor(plan, by_unit, source))
    detail["engines"] = {
        f.engine: {"file": ENGINE_FILES[f.engine], "unsupported": f.unsupported, "unmapped": f.unmapped} for f in forms
    }
    for form in forms:
        atomic_write(out / ENGINE_FILES[form.engine], form.text)
    atomic_write_json(out / PLAN_FILE, detail)
    return [out / PLAN_FILE, *(out / ENGINE_FILES[f.engine] for f in forms)]
