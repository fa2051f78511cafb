"""Tiny checkpoints of real architectures: config class -> `from_config` (seeded) -> safetensors on disk.

Random weights, real module structure and real tensor names: what `onboard inspect` must read correctly.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.tiny.configs import TINY, WINDOW
from tests.tiny.tiny_wrappers import ALL_WRAPPERS, wrapper_config

__all__ = ["TINY", "WINDOW", "TOKENIZER_FILES", "make_tiny_config", "make_tiny_checkpoint", "make_tiny_mtp_checkpoint"]

# Files copied from a tokenizer folder when one is given (a real tokenizer from ../shared/data).
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
    "added_tokens.json",
    "chat_template.jinja",
    "generation_config.json",
)


def make_tiny_config(model_type: str, overrides: dict[str, Any] | None = None) -> Any:
    """Build the tiny config of `model_type` (TINY entry plus `overrides`) through its transformers config class;
    a multimodal wrapper's from WRAPPERS (tests/tiny/tiny_wrappers.py).

    Raises:
        KeyError: `model_type` has no TINY entry.
        ValueError: an override is not a knob of that config class (it would become a stray, unused config key).
    """
    from transformers import AutoConfig

    if model_type in ALL_WRAPPERS:
        kwargs = {**wrapper_config(model_type), **(overrides or {})}
        config = AutoConfig.for_model(model_type, **kwargs)
        _check_no_stray_keys(model_type, kwargs, config, "tests/tiny/tiny_wrappers.py")
        text = config.get_text_config()
        _check_no_stray_keys(text.model_type, kwargs["text_config"], text, "tests/tiny/tiny_wrappers.py")
        return config
    if model_type not in TINY:
        raise KeyError(f"no tiny config for model_type {model_type!r}; add it to tests/tiny/configs.py TINY")
    kwargs = {**TINY[model_type], **(overrides or {})}
    config = AutoConfig.for_model(model_type, **kwargs)
    _check_no_stray_keys(model_type, kwargs, config, "tests/tiny/configs.py")
    return config


def _check_no_stray_keys(model_type: str, kwargs: dict[str, Any], config: Any, where: str) -> None:
    """Legacy keywords are consumed by __post_init__; anything left as an attribute but unknown is a typo."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    cls = CONFIG_MAPPING[model_type]
    known = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
    known |= set(getattr(cls, "attribute_map", {})) | {"model_type"}
    stray = sorted(k for k in kwargs if k not in known and k in config.to_dict())
    if stray:
        raise ValueError(f"{model_type}: {stray} are not fields of {cls.__name__}; fix {where}")


def make_tiny_checkpoint(
    model_type: str,
    out_dir: Path,
    *,
    seed: int = 0,
    dtype: str = "float32",
    tokenizer_dir: Path | None = None,
    overrides: dict[str, Any] | None = None,
) -> Path:
    """Write a tiny random-weight checkpoint of `model_type` (config.json + model.safetensors) into `out_dir`.

    Args:
        model_type: a key of TINY (a transformers `model_type`).
        out_dir: destination folder (created).
        seed: torch seed for the weight init: same seed, same bytes.
        dtype: torch dtype name the weights are saved in (float32, bfloat16, float16).
        tokenizer_dir: copy the tokenizer files found there (TOKENIZER_FILES) next to the weights.
        overrides: config knobs applied over the TINY entry.

    Returns:
        `out_dir`.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

    config = make_tiny_config(model_type, overrides)
    torch_dtype = getattr(torch, dtype)
    auto = AutoModelForImageTextToText if model_type in ALL_WRAPPERS else AutoModelForCausalLM
    # fork_rng: building a fixture must not shift the global RNG stream of the test that asked for it.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = auto.from_config(config, dtype=torch_dtype)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    if model_type in SAVED_LAYOUT_FIXES:
        SAVED_LAYOUT_FIXES[model_type](out_dir, config)
    if tokenizer_dir is not None:
        for name in TOKENIZER_FILES:
            src = Path(tokenizer_dir) / name
            if src.is_file():
                shutil.copyfile(src, out_dir / name)
    return out_dir


def split_conv_at_projections(out_dir: Path, config: Any) -> None:
    """OLMo-hybrid as its released checkpoints store it: q / k / v convolutions of the q, k and v projections' widths.
    transformers 5.25 saves its fused conv1d cut into three equal parts instead (the reverse of the Concatenate it
    loads with), which only transformers reads back right; concatenated again, the split changes nothing it loads."""
    import torch
    from safetensors.torch import load_file, save_file

    file = Path(out_dir) / "model.safetensors"
    weights = load_file(str(file))
    key = config.linear_num_key_heads * config.linear_key_head_dim
    value = config.linear_num_value_heads * config.linear_value_head_dim
    prefixes = sorted({n[: -len("q_conv1d.weight")] for n in weights if n.endswith(".q_conv1d.weight")})
    for prefix in prefixes:
        fused = torch.cat([weights[f"{prefix}{x}_conv1d.weight"] for x in "qkv"])
        for x, part in zip("qkv", fused.split([key, key, value]), strict=True):
            weights[f"{prefix}{x}_conv1d.weight"] = part.clone()
    save_file(weights, str(file), metadata={"format": "pt"})


# Families whose transformers save is not the layout their released checkpoints have: rewritten after saving.
SAVED_LAYOUT_FIXES: dict[str, Callable[[Path, Any], None]] = {"olmo_hybrid": split_conv_at_projections}


def make_tiny_mtp_checkpoint(
    model_type: str, out_dir: Path, *, mtp_layers: int = 1, seed: int = 0, overrides: dict[str, Any] | None = None
) -> Path:
    """A tiny checkpoint with `mtp_layers` multi-token-prediction layers in DeepSeek-V3's layout (float32).

    transformers saves no MTP tensors, so the model is built with `mtp_layers` extra decoder layers (their tensors
    get the family's real names and MoE/dense choice at those indices), then each extra layer N gains `enorm`,
    `hnorm`, `eh_proj`, `shared_head.norm` (random, not the init's ones: a swapped norm must show) and copies of the
    LM head and embedding (`shared_head.head`, `embed_tokens`, as DeepSeek-V3 ships them); config.json is rewritten
    to the main layer count with `num_nextn_predict_layers`."""
    import json

    import torch
    from safetensors.torch import load_file, save_file

    main_layers = make_tiny_config(model_type, overrides).num_hidden_layers
    total = {**(overrides or {}), "num_hidden_layers": main_layers + mtp_layers, "num_mtp_layers": mtp_layers}
    make_tiny_checkpoint(model_type, out_dir, seed=seed, overrides=total)
    weights = load_file(str(Path(out_dir) / "model.safetensors"))
    hidden = weights["model.embed_tokens.weight"].shape[1]
    gen = torch.Generator().manual_seed(seed + 1)
    for index in range(main_layers, main_layers + mtp_layers):
        prefix = f"model.layers.{index}."
        for norm in ("enorm", "hnorm", "shared_head.norm"):
            weights[f"{prefix}{norm}.weight"] = 1.0 + 0.2 * torch.randn(hidden, generator=gen)
        weights[prefix + "eh_proj.weight"] = torch.randn(hidden, 2 * hidden, generator=gen) / (2 * hidden) ** 0.5
        weights[prefix + "shared_head.head.weight"] = weights["lm_head.weight"].clone()
        weights[prefix + "embed_tokens.weight"] = weights["model.embed_tokens.weight"].clone()
    save_file(weights, str(Path(out_dir) / "model.safetensors"), metadata={"format": "pt"})
    config_file = Path(out_dir) / "config.json"
    config = json.loads(config_file.read_text())
    config["num_hidden_layers"] = main_layers
    config_file.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    return Path(out_dir)
