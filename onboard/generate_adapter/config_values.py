"""Config values for generated adapters (`ArgsBase.from_dict`, runtime.py), read through onboard/names/config.py
(the alias table and derived values inspect reads too).

When transformers knows `model_type` (its own config class, never the repository's code), each value is read as its
modelling code reads it: class defaults filled in, `attribute_map` renames applied, a legacy `rope_scaling` merged
over `rope_parameters`. A day-zero model_type reads config.json as written, through ALIASES.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from functools import cache
from typing import Any

from onboard.errors import ConfigError
from onboard.inspect_checkpoint.config_class_input import for_config_class
from onboard.names.config import ALIASES, activation_name, kv_heads, num_layers_from_types, partial_rotary_factor
from onboard.names.config_keys import MODEL_SECTIONS
from onboard.serde import decode_special_floats


def _activation_name(values: ConfigValues) -> Any:
    act = values.get("hidden_act")
    mapped = activation_name(str(values.raw.get("model_type") or ""), act)
    return mapped if mapped != act else None


# field -> rule returning the value to use instead (None: keep the value read).
DERIVED: dict[str, Callable[[ConfigValues], Any]] = {
    "hidden_act": _activation_name,
    "num_hidden_layers": lambda v: None if v.in_raw("num_hidden_layers") else num_layers_from_types(v.get),
    "num_key_value_heads": lambda v: kv_heads(v.get),
    "partial_rotary_factor": lambda v: partial_rotary_factor(v.get),
}


@cache
def _config_class(model_type: str) -> type | None:
    # CONFIG_MAPPING holds transformers' own classes only: the repository's configuration code never runs here.
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    return CONFIG_MAPPING[model_type] if model_type in CONFIG_MAPPING else None


class ConfigValues:
    """Values of one config: transformers' resolved config object when it knows the class, else the raw dict."""

    def __init__(self, raw: Mapping[str, Any], resolved: Any = None) -> None:
        self.raw = raw
        self.resolved = resolved
        self.source = f"transformers {type(resolved).__name__}" if resolved is not None else "config.json"

    def lookup(self, key: str) -> Any:
        """One key, no aliases: transformers' resolved attribute, else config.json's; then the same in a nested
        section of the model's own keys (DBRX's attn_config / ffn_config)."""
        value = self._lookup(self.resolved, self.raw, key)
        for section in MODEL_SECTIONS:
            if value is not None:
                break
            nested = self.raw.get(section)
            if isinstance(nested, dict):
                value = self._lookup(getattr(self.resolved, section, None), nested, key)
        return value

    @staticmethod
    def _lookup(resolved: Any, raw: Mapping[str, Any], key: str) -> Any:
        if resolved is not None and key not in AS_WRITTEN:
            try:
                value = getattr(resolved, key)
            except Exception:  # noqa: BLE001 - AttributeError, or transformers refusing a global read of a per-layer
                value = None  # value (AmbiguousGlobalPerLayerAttributeError: Gemma 4): config.json's value then
            if value is not None:
                return value
        return raw.get(key)

    def has(self, key: str) -> bool:
        return self.lookup(key) is not None

    def in_raw(self, name: str, extra: Iterable[str] = ()) -> bool:
        """Whether config.json itself names the quantity (any spelling, any model section), null or not."""
        sections = [self.raw] + [self.raw[s] for s in MODEL_SECTIONS if isinstance(self.raw.get(s), dict)]
        return any(key in section for section in sections for key in (name, *extra, *ALIASES.get(name, ())))

    def get(self, name: str, extra: Iterable[str] = ()) -> Any:
        """First non-null value among `name`, `extra` and ALIASES[name] (None when none is set)."""
        return self.find(name, extra)[1]

    def find(self, name: str, extra: Iterable[str] = ()) -> tuple[bool, Any]:
        """(found, value): the first non-null value among the spellings; (True, None) when config.json sets one
        to null explicitly (DeepSeek-V2-Lite's q_lora_rank)."""
        extra = tuple(extra)  # a chain naming `name` itself keeps its order (names.config.SSM_KEYS)
        keys = extra if name in extra else (name, *extra, *ALIASES.get(name, ()))
        for key in keys:
            value = self.lookup(key)
            if value is not None:
                return True, value
        return any(key in self.raw for key in keys), None


AS_WRITTEN = frozenset({"per_layer_config"})
"""Keys read as config.json writes them, not as transformers resolves them: per_layer_config becomes one config
object per layer there; the adapter applies the overrides itself (ArgsBase.for_layer)."""


def read_config(config: Mapping[str, Any]) -> ConfigValues:
    """Resolve `config` (a config.json dict) with transformers' class for its model_type when there is one."""
    config = decode_special_floats(dict(config))
    cls = _config_class(str(config.get("model_type") or ""))
    if cls is None:
        return ConfigValues(config)
    try:
        resolved = cls.from_dict(for_config_class(config))
    except Exception as exc:  # transformers validates configs in many ways; any rejection is the same finding
        raise ConfigError(
            f"config.json: transformers' {cls.__name__} rejects it ({type(exc).__name__}: {exc})",
            "fix the field it names; transformers could not load this checkpoint either",
        ) from exc
    return ConfigValues(config, resolved)


def field_values(
    fields: Iterable[dataclasses.Field], config: Mapping[str, Any], extra_aliases: Mapping[str, tuple[str, ...]]
) -> tuple[dict[str, Any], list[str]]:
    """(kwargs for the fields that have a value, names of required fields that have none)."""
    values = read_config(config)
    kwargs, missing = {}, []
    for f in fields:
        found, value = values.find(f.name, extra_aliases.get(f.name, ()))
        derive = DERIVED.get(f.name)
        derived = derive(values) if derive is not None else None
        if derived is not None:
            found, value = True, derived
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        # A size the adapter cannot default must be in config.json itself: transformers' class default (4096
        # hidden, ...) would only turn a broken config into a shape mismatch later.
        if required and derived is None and not values.in_raw(f.name, extra_aliases.get(f.name, ())):
            found = False
        if found:
            kwargs[f.name] = value
        elif required:
            missing.append(f.name)
    return kwargs, missing
