"""What of a config.json dict may reach a transformers config class (`from_dict`), for inspect and generate alike.

Config classes expand some values as they are built (a label entry per `num_labels`, a `layer_types` entry per
layer), so a hostile num_hidden_layers = 2**70 would exhaust memory: the labels are left out (no causal-LM weight
depends on them), and a layer count beyond MAX_LAYERS, at any depth, is a ConfigError naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from onboard.errors import ConfigError

MAX_LAYERS = 10_000  # generous: the deepest released decoders have a few hundred layers
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
