"""AdapterPlan -> the text of adapters/<model_type>.py (templates/adapter.py.j2). The import block is computed from
the rendered body, ordered as ruff's isort wants, so every adapter is lint-clean.
"""

from __future__ import annotations

import dataclasses
import io
import textwrap
import tokenize

from onboard.generate_adapter.adapter_spec import BASE_FIELDS, AdapterSpec
from onboard.generate_adapter.compose_rules import AdapterPlan
from onboard.generate_adapter.render import LINE, format_expr, py_repr, render
from onboard.generate_adapter.weight_inference import WeightRule
from onboard.names.tensors import DROPPED

REGENERATE_COMMAND = "python -m onboard.generate_adapter.regenerate"
REGENERATE = f"onboard generate CHECKPOINT (the committed adapters/: {REGENERATE_COMMAND})"

# Name -> (isort section: 0 stdlib, 1 third party, 2 first party, the module it is imported from).
IMPORTABLE: dict[str, tuple[int, str]] = {
    name: (section, module)
    for section, module, names in (
        (0, "dataclasses", "dataclass field"),
        (0, "typing", "Any"),
        (1, "", "torch"),
        (1, "torch", "nn"),
        (2, "onboard.blocks.attention", "Attention AttentionContext"),
        (2, "onboard.blocks.embeddings", "Embedding LMHead"),
        (2, "onboard.blocks.conv", "ShortConv"),
        (2, "onboard.blocks.deltanet", "GatedDeltaNet"),
        (2, "onboard.blocks.mamba", "MambaMixer"),
        (2, "onboard.blocks.mamba2", "Mamba2Mixer"),
        (2, "onboard.blocks.mla", "IndexerSpec MLAttention mla_scale"),
        (2, "onboard.blocks.mlp", "GatedMLP MLP"),
        (2, "onboard.blocks.moe", "MoE RouterSpec"),
        (2, "onboard.blocks.norms", "LayerNorm QKNormSpec RMSNorm"),
        (2, "onboard.errors", "ConfigError"),
        (2, "onboard.generate_adapter.extra_blocks", "GptOssMoE SparseMixerMoE XIELUMLP DenseBesideMoE"),
        (2, "onboard.generate_adapter.composed_blocks", "LearnedPositions SinusoidalPositions PerLayerInputs"),
        (2, "onboard.generate_adapter.composed_blocks", "HeadTransform PerLayerGate MLA_LATENT_NORM_EPS"),
        (2, "onboard.generate_adapter.runtime", "FULL SLIDING CHUNKED LEGACY_LAYER_TYPES AdapterModel ArgsBase"),
        (2, "onboard.generate_adapter.runtime", "WeightRule rope_config rotaries kv_shared_source head_dims"),
    )
    for name in names.split()
}

PLACEMENT_DOC = {
    "pre": "Pre-norm layer: x + attn(norm(x)), then x + mlp(norm(x)).",
    "post": "Post-norm layer: x + norm(attn(x)), then x + norm(mlp(x)).",
    "post_ln": "Post-LN layer: norm(x + attn(x)), then norm(x + mlp(x)); no final norm after the last layer.",
    "sandwich": "Sandwich-norm layer: x + norm(attn(norm(x))), then x + norm(mlp(norm(x))).",
    "parallel": "Parallel layer: attention and MLP both read norm(x); x + attn + mlp.",
    "parallel2": "Parallel layer with two norms: x + attn(norm1(x)) + mlp(norm2(x)).",
    "single": "Single-block layer: x + mixer(norm(x)), the mixer a token mixer or a feed-forward block by layer type.",
    "parallel_ssm": "Mamba beside attention: x + mamba(h) * s + attn(h * a) * b for h = norm(x), then x + mlp(norm(x)).",
    "by_layer_type": "Pre-norm where the layer type has an input norm, post-norm (x + norm(mixer(x))) elsewhere.",
}


FORWARD: dict[str, tuple[str, ...]] = {
    "pre": (
        "x = x + self.self_attn(self.{n0}(x), cos, sin, ctx){scale}",
        "return x + self.{mlp}(self.{n1}(x)){scale}",
    ),
    "post": ("x = x + self.{n0}(self.self_attn(x, cos, sin, ctx))", "return x + self.{n1}(self.{mlp}(x))"),
    "post_ln": ("x = self.{n0}(x + self.self_attn(x, cos, sin, ctx))", "return self.{n1}(x + self.{mlp}(x))"),
    # OLMo-hybrid: pre-norm linear-attention layers (n0 their input norm), post-norm attention layers (n2 theirs
    # after the MLP); n1 is before the MLP in the first, on the mixer's output in the second
    "by_layer_type": (
        "if self.{n0} is not None:",
        "    x = x + self.self_attn(self.{n0}(x), cos, sin, ctx)",
        "    return x + self.{mlp}(self.{n1}(x))",
        "x = x + self.{n1}(self.self_attn(x, cos, sin, ctx))",
        "return x + self.{n2}(self.{mlp}(x))",
    ),
    "sandwich": (
        "x = x + self.{n1}(self.self_attn(self.{n0}(x), cos, sin, ctx))",
        "return x + self.{n3}(self.{mlp}(self.{n2}(x){extra}))",
    ),
    "parallel": ("h = self.{n0}(x)", "return x + self.self_attn(h, cos, sin, ctx) + self.{mlp}(h)"),
    "parallel2": ("return x + self.self_attn(self.{n0}(x), cos, sin, ctx) + self.{mlp}(self.{n1}(x))",),
    # Falcon-H1: the Mamba-2 mixer and attention read one norm's output; their scaled sum joins the residual
    "parallel_ssm": (
        "h = self.{n0}(x)",
        "attn_in, attn_out, mixer_out = self.mixer_scales",
        "x = x + (self.mamba(h, cos, sin, ctx) * mixer_out + self.self_attn(h * attn_in, cos, sin, ctx) * attn_out)",
        "return x + self.{mlp}(self.{n1}(x))",
    ),
    # Nemotron-H / Mamba-2: one block per layer (self_attn None on feed-forward layers, the MLP None on the others);
    # the norm reads the residual in the weights' dtype (a float32 residual stream is cast back, as transformers).
    "single": (
        "h = self.{n0}(x.to(self.{n0}.weight.dtype))",
        "residual = {residual}",
        "if self.self_attn is not None:",
        "    return residual + self.self_attn(h, cos, sin, ctx)",
        "return residual + self.{mlp}(h)",
    ),
}


def _aliases(aliases: dict[str, tuple[str, ...]]) -> str:
    """The ALIASES dict literal: on its line when it fits, else one entry per line (as ruff format lays it out)."""
    if not aliases:
        return ""
    items = [f"{py_repr(k)}: {py_repr(v)}" for k, v in sorted(aliases.items())]
    one_line = "{" + ", ".join(items) + "}"
    if len("    ALIASES = ") + len(one_line) <= LINE:
        return one_line
    return "{\n" + "".join(f"        {item},\n" for item in items) + "    }"


def _forward(spec: AdapterSpec) -> list[str]:
    """The decoder layer's forward body for the spec's placement."""
    slots = {f"n{k}": name for k, name in enumerate(spec.norm_names)}
    fill = {
        "mlp": "mlp",
        "scale": " * self.residual_scale" if spec.residual_scale else "",
        "residual": "x.float() if self.residual_in_fp32 else x" if spec.residual_fp32 else "x",
        "extra": ", x" if spec.mlp_reads_residual else "",
    }
    lines = [line.format(**fill, **slots) for line in FORWARD[spec.placement]]
    if spec.mlp_reads_residual and not any(", x)" in line for line in lines):
        raise ValueError(f"a feed-forward block reading the residual with the {spec.placement!r} placement")
    if not (spec.layer_scalar or spec.layer_gate):
        return lines
    if any(line.startswith("    return ") for line in lines):
        raise ValueError(f"a layer scalar or per-layer input with the {spec.placement!r} placement's early returns")
    # Gemma 4: the per-layer input gated into the residual after the MLP, then the whole layer times its scalar
    lines[-1] = "x = " + lines[-1].removeprefix("return ")
    if spec.layer_gate:
        lines.append("x = x + self.per_layer(x, ctx.layer_input if ctx is not None else None)")
    lines.append("return x * self.layer_scalar" if spec.layer_scalar else "return x")
    return lines


def _fields(plan: AdapterPlan) -> list[tuple[str, str, str | None]]:
    """BASE_FIELDS with the composition's overrides and additions; required fields first (dataclass order rule)."""
    extra = {name: (name, ann, default) for name, ann, default in plan.spec.fields}
    merged = [extra.pop(name, (name, ann, default)) for name, ann, default in BASE_FIELDS] + list(extra.values())
    return [f for f in merged if f[2] is None] + [f for f in merged if f[2] is not None]


def _sort_key(name: str) -> tuple[int, str]:
    # ruff isort order-by-type: CONSTANTS, then Classes, then functions / variables.
    kind = 0 if name.isupper() else 1 if name[0].isupper() else 2
    return kind, name


def _code_names(body: str) -> set[str]:
    """Names used in code (not in strings, docstrings or comments), excluding attribute names after a dot."""
    names, previous = set(), None
    for tok in tokenize.generate_tokens(io.StringIO(body).readline):
        if tok.type == tokenize.NAME and previous != ".":
            names.add(tok.string)
        if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT):
            previous = tok.string
    return names


def _imports(body: str) -> str:
    code = _code_names(body)
    used = [name for name in IMPORTABLE if name in code]
    sections: list[list[str]] = [[], [], []]
    by_module: dict[tuple[int, str], list[str]] = {}
    for name in used:
        section, module = IMPORTABLE[name]
        if module:
            by_module.setdefault((section, module), []).append(name)
        else:
            sections[section].append(f"import {name}")
    for (section, module), names in sorted(by_module.items()):
        names = sorted(names, key=_sort_key)
        line = f"from {module} import {', '.join(names)}"
        if len(line) > 120:
            line = f"from {module} import (\n" + "".join(f"    {n},\n" for n in names) + ")"
        sections[section].append(line)
    return "\n\n".join("\n".join(s) for s in sections if s)


def _rule_call(rule: WeightRule) -> str:
    op = "" if rule.op == "copy" else f", {py_repr(rule.op)}"
    return f"WeightRule({py_repr(rule.target)}, {py_repr(rule.sources)}{op})"


def adapter_source(plan: AdapterPlan) -> str:
    """The full, deterministic source of adapters/<plan.model_type>.py."""
    spec = plan.spec
    uses_window = "window" in spec.attention
    layer_exprs = (spec.rope_kind, spec.attention, spec.mlp, spec.kv_source or "", spec.input_norm)
    summary = spec.summary[0].upper() + spec.summary[1:] + "."
    summary += f" Closest known family: {plan.closest_family or 'none'}."
    summary += f" Family facts applied: {', '.join(plan.overrides)}." if plan.overrides else ""
    head_options = "".join(f", {kw}" for kw in spec.lm_head)
    context = {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)} | {
        "model_type": plan.model_type,
        "summary": textwrap.fill(summary, 116),
        "stubs": plan.stubs,
        "regenerate": REGENERATE,
        "aliases": _aliases(spec.aliases),
        "fields": _fields(plan),
        "weight_map": [format_expr(_rule_call(rule), 4) for rule in plan.weight_rules],
        "dropped": DROPPED + spec.dropped,
        "placement_doc": PLACEMENT_DOC[spec.placement],
        "uses_window": uses_window,
        "uses_layer_type": uses_window
        or any("layer_type" in x for x in (*layer_exprs, *dict(spec.norm_exprs).values())),
        "norm_exprs": dict(spec.norm_exprs),
        "forward": _forward(spec),
        "lm_head": f"LMHead({spec.embed_width}, args.vocab_size, tied_to=tied{head_options})",
        "rotary_head_dim": f", head_dim={spec.rotary_head_dim}" if spec.rotary_head_dim else "",
    }
    text = render("adapter.py.j2", **context)
    head, _, body = text.partition("@@IMPORTS@@")
    return head + _imports(body) + body
