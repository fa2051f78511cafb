"""What of a config.json dict may reach a transformers config class (`from_dict`): the one gate inspect's weight
estimate and generate's config resolution both pass a checkpoint's config through.

transformers' config classes expand some values into Python objects as they are built: a label dict entry per
`num_labels`, a `layer_types` entry per layer (Gemma 3, Qwen3, ...). A corrupt or hostile config.json with
num_hidden_layers = 2**70 then hangs onboard until it runs out of memory, before any check of ours runs. So:
- the classification labels (`num_labels`, `id2label`, `label2id`) are left out: they size no causal-LM weight and
  no adapter reads them;
- a layer count beyond MAX_LAYERS (or below zero), at the top level or in a nested section such as `text_config`,
  is a ConfigError naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from onboard.errors import ConfigError

MAX_LAYERS = 10_000
"""Generous: the deepest released decoders have a few hundred layers (inspect's plausibility check reads it too)."""
LABEL_KEYS = frozenset({"num_labels", "id2label", "label2id"})
LAYER_COUNT_KEYS = ("num_hidden_layers", "n_layer", "n_layers", "num_layers", "num_decoder_layers")


def for_config_class(config: Mapping[str, Any]) -> dict[str, Any]:
    """`config` without the label keys (nested sections too), after checking its layer counts."""
    _check_layer_counts(config, "")
    return _without_labels(config)


def _without_labels(section: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _without_labels(v) if isinstance(v, Mapping) else v for k, v in section.items() if k not in LABEL_KEYS}


def _check_layer_counts(section: Mapping[str, Any], where: str) -> None:
    for key, value in section.items():
        if isinstance(value, Mapping):
            _check_layer_counts(value, f"{where}{key}.")
        elif key in LAYER_COUNT_KEYS and isinstance(value, (int, float)) and not isinstance(value, bool):
            if not 0 <= value <= MAX_LAYERS:
                raise ConfigError(
                    f"config.json: {where}{key}={value} is not a plausible layer count (0..{MAX_LAYERS})",
                    "the config is corrupt or not a transformers config; fix the field",
                )
