"""Weight bytes from config.json alone, for checkpoints whose safetensors headers were not read.

The installed transformers builds the model on the meta device (shapes only), from its own classes only
(trust_remote_code=False). Quantized weights are sized by their byte model (quant_bytes.py), the rest in the config's
dtype; MTP layers, which transformers drops but checkpoints store, are added as copies of the last decoder layer.
When no estimate is possible the bytes are None and the reason says why: unknown weights are never 0 B.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import logging
import math
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from onboard.inspect_checkpoint import tensor_names as tn
from onboard.inspect_checkpoint.config_class_input import for_config_class
from onboard.inspect_checkpoint.memory import KV_DTYPE_BYTES
from onboard.inspect_checkpoint.quant_bytes import ByteModel, byte_model, ignored_modules
from onboard.profile import WeightsEstimate

# Components whose matrices quantization methods convert; embeddings, the head, norms and routers stay as they are.
QUANTIZED_COMPONENTS = {"attention", "mlp", "experts", "shared_experts"}
# Building a meta model costs ~45 ms per DeepSeek-V3 layer; beyond this a config is corrupt, not a model.
MAX_LAYERS = 1024


@dataclass(frozen=True)
class Estimate:
    bytes: int | None
    detail: WeightsEstimate | None
    reason: str  # how the bytes were estimated, or why they could not be


def estimate_weights(config: dict[str, Any], mtp_layers: int) -> Estimate:
    """Never raises."""
    try:
        key = json.dumps(config, sort_keys=True)
    except (TypeError, ValueError) as exc:
        return Estimate(None, None, f"config.json cannot be re-serialised ({exc})")
    return _estimate(key, mtp_layers)


@lru_cache(maxsize=16)
def _estimate(config_json: str, mtp_layers: int) -> Estimate:
    config = json.loads(config_json)
    quant = config.get("quantization_config")
    model_bytes: ByteModel | None = None
    if isinstance(quant, dict):
        model_bytes = byte_model(quant)
        if model_bytes is None:
            method = quant.get("quant_method") or quant.get("method") or "?"
            return Estimate(
                None,
                None,
                f"quantization method {method!r} has no byte model in onboard "
                "(onboard/inspect_checkpoint/quant_bytes.py)",
            )
    try:
        model, version = _meta_model(config)
    except _NoEstimate as exc:
        return Estimate(None, None, str(exc))
    dtype = str(config.get("torch_dtype") or config.get("dtype") or "bfloat16").removeprefix("torch.")
    width = KV_DTYPE_BYTES.get(dtype, 2)
    ignored = ignored_modules(quant) if isinstance(quant, dict) else ()
    per_layer: dict[int, tuple[int, int]] = {}
    total_bytes = total_params = quantized = 0
    for name, shape in _stored_tensors(model):
        numel = math.prod(shape)
        if model_bytes is not None and _is_quantized(name, shape, model_bytes, ignored):
            nbytes = model_bytes.tensor_bytes(shape)
            quantized += numel
        else:
            nbytes = numel * width
        total_bytes += nbytes
        total_params += numel
        layer = tn.layer_index(name)
        if layer is not None:
            b, p = per_layer.get(layer, (0, 0))
            per_layer[layer] = (b + nbytes, p + numel)
    mtp_bytes = mtp_params = 0
    if mtp_layers and per_layer and not _has_mtp(model, per_layer):
        mtp_bytes, mtp_params = _mtp_size(model, per_layer[max(per_layer)], mtp_layers, width, config)
    detail = WeightsEstimate(
        parameters=total_params + mtp_params,
        mtp_parameters=mtp_params,
        quantized_parameters=quantized,
        dtype=dtype,
        quantization=model_bytes.description if model_bytes else None,
        transformers_version=version,
    )
    how = f"{type(model).__name__} on the meta device (transformers {version})"
    how += f", {model_bytes.description}" if model_bytes else f", {dtype}"
    how += f", plus {mtp_layers} MTP layer(s) as copies of the last decoder layer" if mtp_params else ""
    return Estimate(total_bytes + mtp_bytes, detail, how)


class _NoEstimate(Exception):
    """Why no meta model could be built: the message is shown to the user."""


def _meta_model(config: dict[str, Any]) -> tuple[Any, str]:
    try:
        import torch
        import transformers
        from transformers import AutoModelForCausalLM, AutoModelForImageTextToText
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING
        from transformers.models.auto.modeling_auto import (
            MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
            MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES,
        )
    except ImportError as exc:  # a minimal install without torch
        raise _NoEstimate(f"transformers and torch are needed to count parameters from config ({exc})") from exc
    version = transformers.__version__
    model_type = str(config.get("model_type") or "")
    if model_type not in CONFIG_MAPPING:
        raise _NoEstimate(f"transformers {version} does not know model_type {model_type!r}")
    if model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        auto = AutoModelForCausalLM
    elif model_type in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES:
        auto = AutoModelForImageTextToText
    else:
        raise _NoEstimate(f"transformers {version} has no causal-LM class for model_type {model_type!r}")
    # auto_map (repository code) and the quantization (sized here, not applied) are left out.
    with _quiet():
        try:
            clean = for_config_class({k: v for k, v in config.items() if k not in ("auto_map", "quantization_config")})
            hf_config = CONFIG_MAPPING[model_type].from_dict(clean)
            layers = getattr(hf_config.get_text_config(), "num_hidden_layers", 0) or 0
            if not isinstance(layers, int) or layers > MAX_LAYERS:
                raise _NoEstimate(f"num_hidden_layers={layers} is beyond {MAX_LAYERS}: not estimated")
            with torch.device("meta"):
                model = auto.from_config(hf_config, trust_remote_code=False)
        except _NoEstimate:
            raise
        except Exception as exc:  # any rejection by transformers' classes: reported, never a traceback
            raise _NoEstimate(
                f"transformers {version} could not build {model_type!r} from this config "
                f"({type(exc).__name__}: {str(exc)[:160]})"
            ) from exc
    return model, version


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence transformers' warnings about legacy config values: inspect reports its own findings."""
    logger = logging.getLogger("transformers")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def _stored_tensors(model: Any) -> Iterator[tuple[str, tuple[int, ...]]]:
    """Parameters (tied ones once) and persistent buffers: what a checkpoint stores."""
    stored = set(model.state_dict())
    for name, param in model.named_parameters():
        yield name, tuple(param.shape)
    for name, buffer in model.named_buffers():
        if name in stored:
            yield name, tuple(buffer.shape)


def _is_quantized(name: str, shape: tuple[int, ...], bm: ByteModel, ignored: tuple[str, ...]) -> bool:
    component = tn.component(name)
    if len(shape) < 2 or component not in QUANTIZED_COMPONENTS or name.endswith("bias"):
        return False
    if bm.experts_only and component != "experts":
        return False
    module = name.rsplit(".", 1)[0]
    return not any(_matches(module, pattern) for pattern in ignored)


def _matches(module: str, pattern: str) -> bool:
    """`re:` regexes (compressed-tensors), globs (`model.layers.*.self_attn`) or a dotted module name part."""
    if pattern.startswith("re:"):
        try:
            return re.match(pattern[3:], module) is not None
        except re.error:
            return False
    if "*" in pattern:
        return fnmatch.fnmatch(module, pattern) or fnmatch.fnmatch(module, pattern + ".*")
    return f".{pattern}." in f".{module}."


def _has_mtp(model: Any, per_layer: dict[int, tuple[int, int]]) -> bool:
    """The class already builds its MTP layers (named `mtp`, or layers past num_hidden_layers)."""
    layers = getattr(model.config.get_text_config(), "num_hidden_layers", None)
    if isinstance(layers, int) and max(per_layer) >= layers:
        return True
    return any(".mtp" in name or name.startswith("mtp") for name, _ in model.named_parameters())


def _mtp_size(model: Any, last_layer: tuple[int, int], n: int, width: int, config: dict[str, Any]) -> tuple[int, int]:
    """MTP layers as checkpoints store them: a copy of the last decoder layer plus the projection joining embedding
    and hidden state (2h × h, unquantized) and its norms; DeepSeek-style MTP also stores an embedding and a head."""
    text = model.config.get_text_config()
    hidden = int(getattr(text, "hidden_size", 0) or 0)
    vocab = int(getattr(text, "vocab_size", 0) or 0)
    layer_bytes, layer_params = last_layer
    extra = 2 * hidden * hidden + 3 * hidden
    if "num_nextn_predict_layers" in config or "num_nextn_predict_layers" in (config.get("text_config") or {}):
        extra += 2 * vocab * hidden
    return n * (layer_bytes + extra * width), n * (layer_params + extra)
