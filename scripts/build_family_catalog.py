"""Build onboard/data/families.json: every causal-LM family of the installed transformers, at its default config.

For each model_type: the default config, the model instantiated on the meta device (no memory, no weights) for its
tensor names and shapes, then onboard's own analysis for its features. Run after upgrading transformers:

    .venv/bin/python scripts/build_family_catalog.py
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
warnings.filterwarnings("ignore")


# Families whose default config leaves a part of the architecture out: Bamba's attn_layer_indices is null (no
# attention layer) and Granite-4.0's layer_types unset (Mamba layers only). Built from their tiny test config, which
# has every part, so the catalog lists those tensors too (else a checkpoint's attention reads as new to its family).
PARTIAL_DEFAULTS = {"bamba", "granitemoehybrid"}


def main() -> None:
    import torch
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    families: dict[str, dict] = {}
    failed: dict[str, str] = {}
    for model_type in sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES):
        try:
            families[model_type] = entry(model_type)
        except Exception as exc:  # a family that cannot be built at defaults is listed, not fatal
            failed[model_type] = f"{type(exc).__name__}: {str(exc)[:200]}"
            continue
        print(f"{model_type:28s} {' '.join(families[model_type]['features'])}", file=sys.stderr)
    out = {
        "built_with": {"transformers": transformers.__version__, "torch": torch.__version__},
        "how": "scripts/build_family_catalog.py: default config of each causal-LM family, meta-device tensors",
        "families": families,
        "failed": failed,
    }
    path = REPO / "onboard" / "data" / "families.json"
    path.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"{len(families)} families written to {path}; {len(failed)} failed: {sorted(failed)}", file=sys.stderr)


def entry(model_type: str) -> dict:
    """The catalog entry of one family: its default config (or tiny test config) on the meta device, analysed by
    inspect as it is today. Raises when the family cannot be built."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    from onboard.inspect_checkpoint import profile_from_parts
    from onboard.inspect_checkpoint.checkpoint_types import TensorInfo
    from onboard.inspect_checkpoint.config_view import ConfigView
    from onboard.names.config_keys import IGNORED
    from tests.tiny.configs import TINY

    config = None
    if model_type not in PARTIAL_DEFAULTS:
        try:
            config = AutoConfig.for_model(model_type)
            with torch.device("meta"):
                model = AutoModelForCausalLM.from_config(config)
        except Exception:
            if model_type not in TINY:
                raise
            config = None  # cannot be built at its defaults: the tiny test config has the same structure
    if config is None:
        config = AutoConfig.for_model(model_type, **TINY[model_type])
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
    tied = set()
    if getattr(config, "tie_word_embeddings", False):
        tied = {k for k in model.state_dict() if k.endswith("lm_head.weight")}
    tensors = {
        name: TensorInfo(name, "F32", tuple(t.shape), (0, 0), "meta")
        for name, t in model.state_dict().items()
        if name not in tied
    }
    raw = config.to_dict()
    profile = profile_from_parts(raw, tensors)
    templates = sorted(checkpoint_templates(model) | variant_templates(model_type, config))
    params = {n for n, _ in model.named_parameters(remove_duplicate=False)}
    # Persistent buffers are saved in checkpoints but are not parameters (num_parameters() skips them).
    # Leaf names only: transformers renames modules when it saves (e.g. `gate.x` → `mlp.x`), leaves survive.
    buffers = sorted({n.rsplit(".", 1)[-1] for n in tensors if n not in params})
    buffer_templates = saved_buffer_templates(model, {n for n in tensors if n not in params})
    # As inspect lists them (config_lint.comparable_keys): a text section's and DBRX / MPT's attn_config keys too.
    view = ConfigView(raw)
    keys = sorted({k for s, k in view.all_keys() if k not in IGNORED and not isinstance(view.value(s, k), dict)})
    return {
        "architectures": list(getattr(config, "architectures", None) or [MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type]]),
        "features": list(profile.features),
        "tensor_templates": templates,
        "config_keys": keys,
        "mapped_keys": sorted(mapped_keys(type(config)) - set(keys)),
        "buffers": buffers,
        "buffer_templates": buffer_templates,
    }


def checkpoint_templates(model) -> set[str]:
    """Templates of the tensors a checkpoint of this model can store: the model's own names (what transformers 5
    holds in memory, and what a checkpoint written from its state dict carries, a tied head included: older writers
    stored it) and the names save_pretrained writes, which revert its load-time conversions. Mixtral's checkpoints
    store `block_sparse_moe.experts.{}.w1.weight` per expert, loaded as a fused `mlp.experts.gate_up_proj`: without
    the saved names every Mixtral checkpoint reads as new to its own family."""
    from onboard.inspect_checkpoint import tensor_names

    state = model.state_dict()
    saved = saved_names(model, state) or set()
    return {tensor_names.template(n) for n in set(state) | saved}


def saved_names(model, state: dict) -> set[str] | None:
    """The names save_pretrained writes for `state` (a part of the model's state dict; meta tensors: names and shapes
    only), or None where a conversion cannot run on meta tensors."""
    from transformers.core_model_loading import revert_weight_conversion

    try:
        return set(revert_weight_conversion(model, dict(state)))
    except Exception:  # a conversion that needs real values
        return None


def variant_templates(model_type: str, config) -> set[str]:
    """Templates of the family's tiny test config (tests/tiny/configs.py), which turns on optional parts a default
    config leaves off (Cohere's QK norms, DeepSeek-V2's dense first layers and plain q_proj): a checkpoint of the
    family may store them. Empty when the tiny config is the one the entry was built from, or there is none."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from tests.tiny.configs import TINY

    if model_type not in TINY:
        return set()
    variant = AutoConfig.for_model(model_type, **TINY[model_type])
    if variant.to_dict() == config.to_dict():
        return set()
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(variant)
    return checkpoint_templates(model)


def saved_buffer_templates(model, buffer_names: set[str]) -> list[str]:
    """Templates of the buffers as save_pretrained writes them (transformers reverts its load-time renames on save:
    Inkling-2's `mlp.gate.e_score_correction_bias` is stored as `mlp.gate.bias`). Only names that differ from the
    model's: the leaves already cover the rest."""
    from onboard.inspect_checkpoint import tensor_names

    if not buffer_names:
        return []
    state = model.state_dict()
    saved_all = saved_names(model, state)
    saved_params = saved_names(model, {k: v for k, v in state.items() if k not in buffer_names})
    if saved_all is None or saved_params is None:  # keep the model's names
        return []
    renamed = (saved_all - saved_params) - buffer_names
    return sorted({tensor_names.template(n) for n in renamed})


# Keys RotaryEmbeddingConfigMixin.convert_rope_params_to_dict folds into rope_parameters (pre-v5 configs carry them).
ROPE_LEGACY_KEYS = ("rope_theta", "rope_scaling", "partial_rotary_factor")


def mapped_keys(config_cls: type) -> set[str]:
    """Keys the config class accepts under another name and maps onto its fields: attribute_map aliases, the
    legacy rope keys of the rope mixin, and the keywords its module reads from **kwargs (`kwargs.pop("x", …)`,
    e.g. Gemma 3's rope_local_base_freq). Real pre-v5 configs carry them; they are not novel for this family."""
    import ast
    import inspect

    keys = set(getattr(config_cls, "attribute_map", {}) or {})
    if hasattr(config_cls, "rope_parameters"):  # PreTrainedConfig.__post_init__ converts only for these classes
        keys.update(ROPE_LEGACY_KEYS)
    sources = []
    for cls in config_cls.__mro__:  # a modular family may inherit its parent's __post_init__
        module = inspect.getmodule(cls)
        if module and module.__name__.startswith("transformers.models.") and cls.__module__ == module.__name__:
            try:
                sources.append(inspect.getsource(module))
            except (OSError, TypeError):
                continue
    for node in (n for source in dict.fromkeys(sources) for n in ast.walk(ast.parse(source))):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("pop", "get")
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "kwargs" and node.args
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):  # fmt: skip
            keys.add(node.args[0].value)
    return keys


if __name__ == "__main__":
    main()
