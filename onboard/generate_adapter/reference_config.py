"""Whether the reference computes the model config.json describes: the rotary base transformers' config class
resolves, against config.json as written. Adapters and the reference both read configs through that class, so
parity cannot see a value it drops; an engine reading config.json itself then computes another model (transformers
5.25's DBRX reads rope_parameters, never attn_config.rope_theta).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from onboard.errors import ConfigError
from onboard.generate_adapter.config_values import read_config
from onboard.inspect_checkpoint.config_view import language_model_config
from onboard.names.config import spellings
from onboard.names.config_keys import MODEL_SECTIONS

REFERENCE_ROPE_BASE = "reference_rope_base"
_THETA_KEYS = spellings("rope_theta")  # its spellings an engine may read: rope_theta, rotary_emb_base, ...
_ROPE_DICTS = ("rope_parameters", "rope_scaling")


def rope_base_disagreement(config: Mapping[str, Any]) -> str | None:
    """A sentence naming both values when config.json writes a rotary base (any spelling) and transformers' class
    resolves another; None when they agree, config.json writes none, or transformers has no class for it."""
    text = language_model_config(dict(config))
    written_all = _written_thetas(text)
    if not written_all:
        return None
    try:
        values = read_config(text)
    except ConfigError:  # the adapter's own load reports a config transformers rejects
        return None
    if values.resolved is None:
        return None
    resolved = _theta_of(getattr(values.resolved, "rope_parameters", None))
    if resolved is None:
        return None
    differing = [w for w in written_all if not math.isclose(resolved, w[1], rel_tol=1e-9)]
    if not differing:
        return None
    written = differing[0]
    cls = type(values.resolved).__name__
    return (
        f"transformers' {cls} computes the rotary base {resolved:g}, but config.json sets {written[0]} = "
        f"{written[1]:g}: the reference (and this adapter, which reads configs as transformers does) follow "
        "transformers, while an engine reading config.json computes another model. Decide which base the model was "
        "trained with before recording goldens; if it is config.json's, the reference must be fixed first"
    )


def _written_thetas(config: Mapping[str, Any]) -> list[tuple[str, float]]:
    """(where, value) of every rotary base config.json itself writes: in rope_parameters / rope_scaling (per layer
    type: the full-attention layers'), at the top level, or in a model section (DBRX's attn_config)."""
    out = [(f"{key}.rope_theta", theta) for key in _ROPE_DICTS if (theta := _theta_of(config.get(key))) is not None]
    sections = [("", config)] + [(f"{s}.", config[s]) for s in MODEL_SECTIONS if isinstance(config.get(s), dict)]
    for prefix, section in sections:
        out += [(f"{prefix}{key}", float(section[key])) for key in _THETA_KEYS if _is_number(section.get(key))]
    return out


def _theta_of(params: object) -> float | None:
    """rope_theta of a rope_parameters dict, or of its full-attention entry when it is nested per layer type."""
    if not isinstance(params, Mapping):
        return None
    if isinstance(params.get("full_attention"), Mapping):
        params = params["full_attention"]
    value = params.get("rope_theta")  # type: ignore[union-attr]
    return float(value) if _is_number(value) else None


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
