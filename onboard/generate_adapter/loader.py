"""Fill an adapter's parameters from safetensors files (`safetensors.safe_open`: no pickle, ever), by its weight map
(`WeightRule`s; a parameter no rule names loads from the tensor of its own name). Loading is all-or-nothing: every
parameter filled, every checkpoint tensor consumed or deliberately dropped, shapes checked, else `WeightsError`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from onboard.errors import InputError
from onboard.generate_adapter.weight_inference import OPS, WeightRule


class WeightsError(InputError):
    """The checkpoint's tensors do not fill the adapter exactly (missing, unused or mis-shaped tensors)."""


def _pattern(template: str) -> re.Pattern[str]:
    return re.compile(re.escape(template).replace(r"\{i\}", r"(?P<i>\d+)") + r"\Z")


def checkpoint_index(path: Path) -> dict[str, Path]:
    """Tensor name -> shard file, from model.safetensors.index.json or the *.safetensors files in `path`."""
    index = path / "model.safetensors.index.json"
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (ValueError, KeyError) as exc:
            raise WeightsError(f"{index}: not a safetensors index ({exc})", "re-save the checkpoint") from exc
        return {name: path / shard for name, shard in weight_map.items()}
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise WeightsError(
            f"{path}: no *.safetensors files",
            "adapters load safetensors only (never pickle); convert .bin weights with transformers' save_pretrained",
        )
    from safetensors import safe_open

    out: dict[str, Path] = {}
    for file in files:
        with safe_open(str(file), framework="pt") as f:
            out.update({name: file for name in f.keys()})
    return out


def language_model_index(path: Path, index: dict[str, Path]) -> tuple[dict[str, Path], dict[str, str], int]:
    """The text model's view of a checkpoint: (name -> shard, name -> the name stored, tower tensors left out).

    A multimodal wrapper (Gemma 3, Llama 4, LLaVA) stores its language model under a prefix beside vision / audio
    towers; the adapter reads the prefixed names as a text checkpoint's and counts the towers' tensors it leaves."""
    from onboard.inspect_checkpoint.tensor_names import language_model_name

    out: dict[str, Path] = {}
    stored: dict[str, str] = {}
    towers = 0
    for name, file in index.items():
        text_name = language_model_name(name)
        if text_name is None:
            towers += 1
            continue
        if text_name in out:
            raise WeightsError(
                f"{path}: tensors {stored[text_name]} and {name} both stand for the language model's {text_name}",
                "a checkpoint stores its language model once: remove the duplicate tensor and re-save",
            )
        out[text_name] = file
        stored[text_name] = name
    return out, stored, towers


def stored_elements(path: Path) -> int | None:
    """Elements the checkpoint in `path` stores, from the safetensors headers (None: unreadable, the load says so)."""
    from math import prod

    from onboard.errors import OnboardError
    from onboard.inspect_checkpoint.safetensors_header import read_local_header

    try:
        shards = sorted(set(checkpoint_index(path).values()))
        headers = [read_local_header(shard, shard.name) for shard in shards]
    except (OnboardError, OSError):
        return None
    return sum(prod(t.shape) for h in headers for t in h.tensors.values())


def runtime_tensors(model: nn.Module) -> dict[str, torch.Tensor]:
    """Parameters (tied ones once) and persistent buffers: everything a checkpoint must fill."""
    out = dict(model.named_parameters())
    for mod_name, module in model.named_modules():
        for buf_name, buf in module.named_buffers(recurse=False):
            if buf is not None and buf_name not in module._non_persistent_buffers_set:
                out[f"{mod_name}.{buf_name}" if mod_name else buf_name] = buf
    return out


def _plan_sources(name: str, shape: torch.Size, rules: list[tuple[re.Pattern[str], WeightRule]]) -> tuple[str, list]:
    """(op, sources) for one runtime tensor: sources is a list of names (copy/cat/transpose) or of lists (stack)."""
    for pattern, rule in rules:
        m = pattern.match(name)
        if m is None:
            continue
        fill = {"i": m.group("i")} if "i" in m.groupdict() else {}
        if rule.op == "stack":
            return rule.op, [[s.format(e=e, **fill) for s in rule.sources] for e in range(shape[0])]
        return rule.op, [s.format(**fill) for s in rule.sources]
    return "copy", [name]


CODEGEN_MP_NUM = 4  # CodeGen's qkv_proj row blocks (`mp_num` in its modelling code, not in config.json)
EXPERT_ROW_OPS = ("expert_rows", "expert_rows_transposed")  # rows split into the target's experts (its first dim)
OWNER_OPS = ("deinterleave_heads", "grouped_rows", "fused_rows")  # the owning module knows the layout


def _combine(op: str, tensors: list, owner: nn.Module | None = None, part: str = "", experts: int = 0) -> torch.Tensor:
    if op in ("copy", "zeros_if_absent"):
        return tensors[0]
    if op in EXPERT_ROW_OPS:  # [E x I, H] -> [E, I, H] per source (`experts`: the target's E)
        split = [t.reshape(experts, -1, t.shape[-1]) for t in tensors]
        return split[0].transpose(1, 2) if op == "expert_rows_transposed" else torch.cat(split, dim=1)
    if op == "cat":
        return torch.cat(tensors, dim=0)
    if op == "transpose":
        return tensors[0].transpose(-1, -2)
    if op == "stack":
        return torch.stack([torch.cat(group, dim=0) for group in tensors], dim=0)
    if op == "squeeze":
        value = tensors[0]
        while value.dim() > 1 and value.shape[0] == 1:
            value = value[0]
        return value
    if op == "codegen_qkv":  # [mp blocks][q, v, k][quarter of the heads] -> [q; k; v]
        blocks = tensors[0].reshape(CODEGEN_MP_NUM, 3, -1, *tensors[0].shape[1:])
        return torch.cat([blocks[:, i].reshape(-1, *tensors[0].shape[1:]) for i in (0, 2, 1)])
    if op == "grouped_rows":
        return tensors[0][owner.grouped_rows(part)]  # type: ignore[union-attr]
    if op == "fused_rows":
        return tensors[0][owner.fused_rows(part)]  # type: ignore[union-attr]
    if op == "deinterleave_heads":
        return deinterleave_heads(tensors[0], owner.num_heads, owner.num_kv_heads, owner.head_dim)  # type: ignore[union-attr]
    raise ValueError(f"unknown weight-map op {op!r}; known: {tuple(OPS)}")


def deinterleave_heads(fused: torch.Tensor, heads: int, kv_heads: int, head_dim: int) -> torch.Tensor:
    """Rows [kv group][q heads of the group, k, v][head_dim] -> [all q; all k; all v] (weight or bias)."""
    group = heads // kv_heads
    grouped = fused.reshape(kv_heads, group + 2, head_dim, *fused.shape[1:])
    q = grouped[:, :group].reshape(heads * head_dim, *fused.shape[1:])
    k = grouped[:, group].reshape(kv_heads * head_dim, *fused.shape[1:])
    v = grouped[:, group + 1].reshape(kv_heads * head_dim, *fused.shape[1:])
    return torch.cat((q, k, v), dim=0)


def _short(names: Iterable[str], limit: int = 12) -> str:
    names = sorted(names)
    return ", ".join(names[:limit]) + (f" … ({len(names)} in all)" if len(names) > limit else "")


def load_weights(
    model: nn.Module, path: str | Path, rules: Iterable[WeightRule], dropped: Iterable[str] = ()
) -> dict[str, int]:
    """Fill every runtime tensor of `model` from the checkpoint in `path`, in each tensor's dtype; `dropped`: regexes
    of checkpoint tensors deliberately unused. Returns {loaded, consumed, dropped, towers}; raises WeightsError
    before touching the model if anything is off."""
    path = Path(path)
    index, stored, towers = language_model_index(path, checkpoint_index(path))
    compiled = [(_pattern(r.target), r) for r in rules]
    drop = [re.compile(p) for p in dropped]
    targets = runtime_tensors(model)
    plans, missing, consumed = {}, [], set()
    for name, tensor in targets.items():
        op, sources = _plan_sources(name, tensor.shape, compiled)
        flat = [s for group in sources for s in group] if op == "stack" else sources
        if op == "zeros_if_absent" and flat[0] not in index:
            plans[name] = (op, [])
            continue
        if op == "cat_present" and flat and flat[0] in index:  # the optional parts a layer does not use: not stored,
            # or stored and deliberately dropped (a KV-shared layer's own k/v projections)
            sources = flat = [s for s in flat if s in index and not any(d.fullmatch(s) for d in drop)]
            op = "cat"
        absent = [s for s in flat if s not in index]
        if absent:
            missing.append(f"{name} (needs {_short(absent, 3)})")
        plans[name] = (op, sources)
        consumed.update(flat)
    unused = [k for k in index if k not in consumed and not any(d.fullmatch(k) for d in drop)]
    problems = []
    if missing:
        problems.append(f"unloaded parameters: {_short(missing)}")
    if unused:
        problems.append(f"unused checkpoint tensors: {_short(unused)}")
    if problems:
        raise WeightsError(
            f"{path}: checkpoint does not match the {type(model).__name__} adapter; " + "; ".join(problems),
            "the weight map in the adapter (WEIGHT_MAP / DROPPED) must name every tensor; if the checkpoint has a "
            "new tensor, regenerate with `onboard generate` (it scaffolds a kernel stub for unknown features)",
        )
    from safetensors import safe_open

    shards: dict[Path, Any] = {}

    def read(name: str) -> torch.Tensor:  # each shard opened once
        if index[name] not in shards:
            shards[index[name]] = safe_open(str(index[name]), framework="pt")
        return shards[index[name]].get_tensor(stored.get(name, name))

    with torch.no_grad():
        for name, (op, sources) in plans.items():
            if op == "zeros_if_absent":
                value = read(sources[0]) if sources else torch.zeros(targets[name].shape)
            elif op == "stack":
                value = _combine(op, [[read(s) for s in group] for group in sources])
            else:
                owner = model.get_submodule(name.rsplit(".", 2)[0]) if op in OWNER_OPS else None
                experts = targets[name].shape[0] if op in EXPERT_ROW_OPS else 0
                value = _combine(op, [read(s) for s in sources], owner, name.rsplit(".", 2)[1], experts)
            target = targets[name]
            if tuple(value.shape) != tuple(target.shape):
                raise WeightsError(
                    f"{path}: shape mismatch for {name}: the adapter expects {tuple(target.shape)}, "
                    f"the checkpoint gives {tuple(value.shape)} (from {_short(sources if op != 'stack' else [], 3)})",
                    "config.json and the weights disagree; check the dims fields of config.json",
                )
            target.copy_(value.to(target.dtype))
    dropped_count = sum(1 for k in index if k not in consumed)
    return {"loaded": len(plans), "consumed": len(consumed), "dropped": dropped_count, "towers": towers}
