"""What a tensor name says: which layer it belongs to, which component, which tower. Names are classified once per
template (`model.layers.{}.mlp.experts.{}.w1.weight`), not per tensor.
"""

from __future__ import annotations

import re
from functools import lru_cache

from onboard.names.tensors import (
    COMPONENT_FIRST,
    COMPONENT_RULES,
    LAYER_INDEX,
    LAYER_TEMPLATE,
    LEARNED_POSITIONS,
    LM_PREFIXES,
    SINK_NAMES,
    TOWER_PREFIXES,
    role_component,
    role_mixer,
)

__all__ = ["LEARNED_POSITIONS", "SINK_NAMES", "TOWER_PREFIXES"]

_DIGITS = re.compile(r"(?<=\.)\d+(?=\.|$)")


def template(name: str) -> str:
    """Replace every dotted integer (layer, expert index) by `{}`."""
    return _DIGITS.sub("{}", name)


def layer_index(name: str) -> int | None:
    m = LAYER_INDEX.search(name)
    return int(m.group(1)) if m else None


def in_layer(template: str) -> bool:
    return LAYER_TEMPLATE.search(template) is not None


def tower_of(name: str) -> str | None:
    """`vision` / `audio` for tensors of a non-language tower, else None."""
    return _tower_of_template(template(name))


@lru_cache(maxsize=8192)
def _tower_of_template(tmpl: str) -> str | None:
    stripped = tmpl[6:] if tmpl.startswith("model.") else tmpl
    head = stripped.split(".", 1)[0]
    for tower, prefixes in TOWER_PREFIXES.items():
        if head in prefixes or any(head.startswith(p + "_") for p in prefixes):
            return tower
    return None


def lm_prefix(name: str) -> str | None:
    """The multimodal wrapper prefix `name` is stored under (`language_model.model.`, `llm.`, …), or None."""
    return next((prefix for prefix in LM_PREFIXES if name.startswith(prefix)), None)


def strip_lm_prefix(name: str) -> str:
    """`model.language_model.layers.0…` → `model.layers.0…` so multimodal wrappers read like text models."""
    for prefix in LM_PREFIXES:
        if name.startswith(prefix):
            rest = name[len(prefix) :]
            return rest if rest.startswith(("lm_head", "model.")) else "model." + rest
    return name


def language_model_name(name: str) -> str | None:
    """The name a text model's adapter reads for `name` (wrapper prefix removed), None for a tower's tensor."""
    return None if tower_of(name) is not None else strip_lm_prefix(name)


@lru_cache(maxsize=8192)
def component_of_template(tmpl: str) -> str:
    tower = _tower_of_template(tmpl)
    if tower:
        return tower
    for component, pattern in COMPONENT_FIRST:
        if pattern.search(tmpl):
            return component
    by_role = role_component(tmpl)
    if by_role is not None:
        return by_role
    for component, pattern in COMPONENT_RULES:
        if pattern.search(tmpl):
            return component
    return "other"


def component(name: str) -> str:
    return component_of_template(template(name))


@lru_cache(maxsize=8192)
def layer_role(tmpl: str) -> str | None:
    """Coarse mixer kind a template reveals: mla | attention | ssm | linear | conv, or None. The template's role
    decides (names.tensors.ROLE_MIXERS); names no role knows fall back to these patterns."""
    by_role = role_mixer(tmpl)
    if by_role is not None:
        return by_role
    if re.search(r"kv_a_proj|kv_b_proj|kv_a_layernorm", tmpl):
        return "mla"
    if re.search(r"(\.linear_attn\.|\.rg_lru\.)", tmpl):
        return "linear"
    if re.search(r"(\.conv\.(in_proj|out_proj|conv)|\.short_conv\.)", tmpl):
        return "conv"
    if re.search(r"(\.mixer\.(A_log|D|dt_bias|conv1d|in_proj|x_proj|dt_proj)|\.mamba\.|\.ssm\.)", tmpl):
        return "ssm"
    if re.search(
        r"(self_attn|self_attention|\.attention\.|\.attn\.|multi_head_attention|\.mixer\.(q|k|v|o)_proj|\.mixer\.qkv|\.temporal_block\.(q|k|v|o)_proj)",
        tmpl,
    ):
        return "attention"
    return None
