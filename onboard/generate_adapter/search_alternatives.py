"""The known alternatives the search tries (search.py) when parity's first divergence names a module: what config
and tensors cannot say, as DATA. An alternative is a named set of edits of the composition's AdapterSpec fields (a
keyword or positional argument of a block's constructor, or a statement run in ModelArgs.__post_init__), and the
divergence modules (divergence_capture.LAYER_ROLES' roles) it can explain.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from pathlib import Path

from onboard.generate_adapter.adapter_spec import AdapterSpec

ATTENTION = ("attention", "q_norm", "k_norm")
NORMS = ("input_norm", "post_attention_norm", "post_self_attn_norm", "pre_mlp_norm", "post_mlp_norm", "final_norm")
MLP = ("mlp", "experts", "shared_experts")
MOE = ("router", "experts", "mlp", "shared_experts")
EMBEDDING = ("embedding",)
POST_INIT = "post_init"


@dataclass(frozen=True)
class Edit:
    """Set argument `arg` (a keyword, or a 0-based position) of every `call(...)` in spec field `field` to `value`
    (None: drop the keyword); without a `call`, the whole field; with field POST_INIT, append the statement
    `value`."""

    field: str
    call: str = ""
    arg: str | int = ""
    value: str | None = None


@dataclass(frozen=True)
class Alternative:
    name: str
    modules: tuple[str, ...]
    edits: tuple[Edit, ...]
    requires: tuple[str, str] | None = None
    """(spec field, text) that must occur for the alternative to mean anything (QK-norm placement needs a QK-norm)."""


def _kw(call: str, arg: str, value: str | None, field: str = "attention") -> Edit:
    return Edit(field, call, arg, value)


A = Alternative
ALTERNATIVES: tuple[Alternative, ...] = (  # fmt: skip
    A("embeddings x sqrt(hidden)", EMBEDDING, (Edit("embed_scale", value="args.hidden_size**0.5"),)),
    A("embeddings unscaled", EMBEDDING, (Edit("embed_scale", value="None"),)),
    A("rotary interleaved", ATTENTION, (_kw("Attention", "rope_interleaved", "True"),)),
    A("rotary half-split", ATTENTION, (_kw("Attention", "rope_interleaved", None),)),
    A("QK-norm after rotary", ATTENTION, (_kw("Attention", "qk_norm_after_rope", "True"),), ("attention", "qk_norm=")),
    A("QK-norm before rotary", ATTENTION, (_kw("Attention", "qk_norm_after_rope", None),), ("attention", "qk_norm=")),
    A("attention scale 1/sqrt(head_dim)", ATTENTION, (_kw("Attention", "scale", None),)),
    A(
        "attention scale 1/sqrt(hidden/heads)",
        ATTENTION,
        (_kw("Attention", "scale", "(args.hidden_size / args.num_attention_heads) ** -0.5"),),
    ),
    A("attention scale 1/head_dim", ATTENTION, (_kw("Attention", "scale", "args.head_dim ** -1.0"),)),
    A("no attention soft-cap", ATTENTION, (_kw("Attention", "softcap", None),)),
    A("attention soft-cap 50", ATTENTION, (_kw("Attention", "softcap", "50.0"),)),
    A(
        "norm scales by (1+w)",
        NORMS,
        (_kw("RMSNorm", "offset", "1.0", "norm"), _kw("LayerNorm", "offset", "1.0", "norm")),
    ),
    A("norm scales by w", NORMS, (_kw("RMSNorm", "offset", None, "norm"), _kw("LayerNorm", "offset", None, "norm"))),
    A("norm eps 1e-5", NORMS, (_kw("RMSNorm", 1, "1e-05", "norm"), _kw("LayerNorm", 1, "1e-05", "norm"))),
    A("norm eps 1e-6", NORMS, (_kw("RMSNorm", 1, "1e-06", "norm"), _kw("LayerNorm", 1, "1e-06", "norm"))),
    A(
        "GELU tanh",
        MLP,
        (_kw("GatedMLP", 2, '"gelu_pytorch_tanh"', "mlp"), _kw("MLP", 2, '"gelu_pytorch_tanh"', "mlp")),
        ("summary", "gelu"),
    ),
    A("GELU exact", MLP, (_kw("GatedMLP", 2, '"gelu"', "mlp"), _kw("MLP", 2, '"gelu"', "mlp")), ("summary", "gelu")),
    A("router sigmoid", MOE, (_kw("RouterSpec", "scoring", '"sigmoid"', "mlp"),)),
    A("router softmax", MOE, (_kw("RouterSpec", "scoring", None, "mlp"),)),
    A("top-k weights renormalised", MOE, (_kw("RouterSpec", "norm_topk_prob", "True", "mlp"),)),
    A("top-k weights not renormalised", MOE, (_kw("RouterSpec", "norm_topk_prob", "False", "mlp"),)),
)
COMMON_ROTARY_FRACTIONS = (0.5, 0.25)


def rotary_alternatives(checkpoint: Path, head_dim: int | None) -> tuple[Alternative, ...]:
    """What a stored rotary `inv_freq` says (its length: the rotated share of each head; its values: the base),
    and the common partial-rotary fractions when nothing is stored."""
    inv_freq = _stored_inv_freq(checkpoint)
    out = []
    if inv_freq is not None and head_dim:
        rotated = 2 * len(inv_freq)
        out.append(_fraction(rotated / head_dim, "from the stored inv_freq's length"))
        if len(inv_freq) > 1 and 0 < inv_freq[1] < 1:
            theta = float(inv_freq[1]) ** (-rotated / 2)
            out.append(
                A(f"rope theta {theta:.6g} (from the stored inv_freq)", ATTENTION, _rope_edits("rope_theta", theta))
            )
    out += [_fraction(f, "") for f in COMMON_ROTARY_FRACTIONS if not any(f"fraction {f} " in a.name for a in out)]
    return tuple(out)


def _fraction(fraction: float, why: str) -> Alternative:
    name = f"partial rotary fraction {fraction:g} {why}".strip()
    return A(name, ATTENTION, _rope_edits("partial_rotary_factor", fraction))


def _rope_edits(key: str, value: float) -> tuple[Edit, ...]:
    """Set `key` on ModelArgs and in its rope_parameters (which the rotary table reads first)."""
    stmt = f"self.{key} = {value!r}; self.rope_parameters = {{**(self.rope_parameters or {{}}), {key!r}: {value!r}}}"
    return (Edit(POST_INIT, value=stmt),)


def _stored_inv_freq(checkpoint: Path) -> list[float] | None:
    """The first `*inv_freq` tensor the checkpoint stores (old Llama-derived releases persist it), as floats."""
    from safetensors import safe_open

    index = checkpoint / "model.safetensors.index.json"
    files = sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.is_file() else []
    for name in files or [p.name for p in sorted(checkpoint.glob("*.safetensors"))]:
        with safe_open(str(checkpoint / name), framework="pt") as f:
            key = next((k for k in f.keys() if k.endswith("inv_freq")), None)
            if key is not None:
                return [float(x) for x in f.get_tensor(key).double().flatten()]
    return None


# -- editing the spec's expressions -----------------------------------------------------------------------------


def _split_args(text: str) -> list[str]:
    """Top-level comma-separated arguments of a call's argument text."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    tail = text[start:].strip()
    return parts + ([tail] if tail else [])


def _edit_args(args: list[str], arg: str | int, value: str | None) -> list[str]:
    if isinstance(arg, int):
        positional = [i for i, a in enumerate(args) if not re.match(r"\w+=", a)]
        if arg < len(positional) and value is not None:
            args[positional[arg]] = value
        return args
    kept = [a for a in args if not a.startswith(f"{arg}=")]
    return kept + ([f"{arg}={value}"] if value is not None else [])


def edit_calls(expr: str, call: str, arg: str | int, value: str | None) -> str:
    """`expr` with argument `arg` of every `call(...)` (not `OtherCall(`) set to `value`."""
    out, pos = [], 0
    for match in re.finditer(rf"(?<![\w.]){re.escape(call)}\(", expr):
        if match.start() < pos:
            continue
        depth, end = 1, match.end()
        while depth and end < len(expr):
            depth += {"(": 1, ")": -1}.get(expr[end], 0)
            end += 1
        args = _edit_args(_split_args(expr[match.end() : end - 1]), arg, value)
        out += [expr[pos : match.end()], ", ".join(args), ")"]
        pos = end
    return "".join(out) + expr[pos:]


def apply(spec: AdapterSpec, alternative: Alternative) -> AdapterSpec:
    """`spec` with the alternative's edits (the same spec when nothing changes: the alternative does not apply)."""
    if alternative.requires and alternative.requires[1] not in str(getattr(spec, alternative.requires[0])):
        return spec
    changes: dict[str, object] = {}
    for edit in alternative.edits:
        if edit.field == POST_INIT:
            changes[POST_INIT] = (*changes.get(POST_INIT, spec.post_init), edit.value)  # type: ignore[misc]
        elif not edit.call:
            changes[edit.field] = edit.value
        else:
            text = str(changes.get(edit.field, getattr(spec, edit.field)))
            changes[edit.field] = edit_calls(text, edit.call, edit.arg, edit.value)
    changed = {k: v for k, v in changes.items() if v != getattr(spec, k)}
    return dataclasses.replace(spec, **changed) if changed else spec  # type: ignore[arg-type]
