"""What every generated adapter imports: config parsing (`ArgsBase.from_dict`), rotary set-up per layer type, the
kernel-stub guard, and `AdapterModel` (from_pretrained; forward over left-padded batches, an optional `KVCache`,
optional hidden states). Adapters hold only what is specific to their family, so a fix here lands in all of them.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import torch
from torch import nn

from onboard.blocks.attention import AttentionContext, LayerKV
from onboard.blocks.rotary import RopeConfig, RotaryEmbedding
from onboard.errors import ConfigError, InputError
from onboard.generate_adapter.loader import WeightRule, load_weights
from onboard.inspect_checkpoint.config_view import language_model_config
from onboard.inspect_checkpoint.layer_plan import shared_kv_sources

FULL, SLIDING, CHUNKED = "full_attention", "sliding_attention", "chunked_attention"
LEGACY_LAYER_TYPES = {"mamba": "linear_attention", "attention": FULL}
"""Older names for layer types in config.json (Granite-4.0's layer_types), read as transformers reads them."""


class NotRunnable(InputError):
    """The adapter needs a kernel that is still a generated stub."""


class ArgsBase:
    """Mixin for a generated `ModelArgs` dataclass: `from_dict(config)` reads each field through config_values.py
    (the family's `ALIASES` added), keeps the default when the key is absent, and names missing required keys."""

    ALIASES: ClassVar[dict[str, tuple[str, ...]]] = {}

    @classmethod
    def from_dict(cls, config: Mapping[str, Any]):  # noqa: ANN206 - returns the subclass
        from onboard.generate_adapter.config_values import field_values

        kwargs, missing = field_values(dataclasses.fields(cls), config, cls.ALIASES)  # type: ignore[arg-type]
        if missing:
            raise ConfigError(
                f"config.json lacks {', '.join(missing)} (needed by the {cls.__module__.rsplit('.', 1)[-1]} adapter)",
                "add the fields to config.json (see the model card / the family's transformers config defaults)",
            )
        return cls(**kwargs)  # type: ignore[call-arg]

    def for_layer(self, i: int):  # noqa: ANN201 - returns the subclass
        """These args with config.json's `per_layer_config` overrides for layer i applied (transformers'
        HeterogeneousConfigMixin: Gemma 4's full-attention layers have their own head size and KV heads)."""
        table = getattr(self, "per_layer_config", None) or {}
        overrides = table.get(str(i), table.get(i)) if isinstance(table, Mapping) else None
        if not overrides:
            return self
        names = {f.name for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        unknown = sorted(set(overrides) - names)
        if unknown:
            raise ConfigError(
                f"config.json per_layer_config[{i!r}] overrides {', '.join(unknown)}, which this adapter does not read",
                "regenerate the adapter with `onboard generate` (a new per-layer field is a new mechanism)",
            )
        return dataclasses.replace(self, **overrides)  # type: ignore[type-var]


def head_dims(layers: Sequence[nn.Module]) -> dict[str | None, int]:
    """Each rope kind's head size, from the attention of the layers using it (their sizes differ by kind: Gemma 4)."""
    sizes: dict[str | None, set[int]] = {}
    for layer in layers:
        sizes.setdefault(layer.rope_kind, set()).add(layer.self_attn.head_dim)
    mixed = {kind: sorted(s) for kind, s in sizes.items() if len(s) > 1}
    if mixed:
        raise ConfigError(
            f"config.json: layers of one rope kind with different head sizes {mixed}",
            "one rotary table per kind needs one head size: check per_layer_config",
        )
    return {kind: next(iter(s)) for kind, s in sizes.items()}


def kv_shared_source(layer_types: Sequence[str], num_shared: int | None, i: int) -> int | None:
    """The layer whose keys and values layer i attends over (None: its own), by layer_plan.shared_kv_sources."""
    sources = shared_kv_sources(layer_types, num_shared or 0)
    if i not in sources:
        return None
    if sources[i] is None:
        raise ConfigError(
            f"config.json: layer {i} ({layer_types[i]}) reuses an earlier layer's keys and values "
            f"(num_kv_shared_layers={num_shared}), but no layer before {len(layer_types) - (num_shared or 0)} has "
            "its type",
            "check num_kv_shared_layers and layer_types in config.json",
        )
    return sources[i]


# How many times the checkpoint's stored elements a model built from config.json may hold before it is refused
# unbuilt (tied heads, unstored buffers and dropped MTP layers keep honest models well inside this).
OVERSIZE = 4


def _check_buildable(cls: Any, args: Any, path: Path) -> None:
    """Build the model on the meta device first: impossible dims are a ConfigError naming config.json, and a model
    several times larger than the weights stored beside it is refused before its memory is allocated."""
    from onboard.generate_adapter.loader import stored_elements

    try:
        with torch.device("meta"):
            probe = cls(args)
    except (RuntimeError, ValueError, OverflowError, TypeError) as exc:
        lines = str(exc).strip().splitlines()
        raise ConfigError(
            f"{path / 'config.json'}: the {cls.MODEL_TYPE} adapter cannot build a model from these values "
            f"({type(exc).__name__}: {lines[0][:200] if lines else ''})",
            "check the dims fields of config.json against the weights (onboard inspect compares them)",
        ) from exc
    built = sum(t.numel() for t in probe.parameters())
    stored = stored_elements(path)
    if stored is not None and built > OVERSIZE * stored + 2**20:
        raise ConfigError(
            f"{path / 'config.json'}: describes a model of {built:,} parameters, but the checkpoint stores {stored:,} "
            "elements",
            "check the dims fields of config.json against the weights (onboard inspect compares them)",
        )


def rope_config(args: Any, layer_type: str = FULL, head_dim: int | None = None) -> RopeConfig:
    """RopeConfig for one attention type: `rope_parameters` may be nested per layer type (Gemma 3); old-style configs
    give sliding layers `rope_local_base_freq`."""
    params = getattr(args, "rope_parameters", None) or getattr(args, "rope_scaling", None) or {}
    types = {FULL, SLIDING, *(getattr(args, "layer_types", None) or ())}
    nested = {k: v for k, v in params.items() if k in types and isinstance(v, Mapping)}
    if nested:  # per layer type; a full-attention layer of another name (dots.llm3's indexed_attention) takes the
        others = [v for k, v in nested.items() if k != SLIDING]  # one entry that is not sliding
        params = nested.get(layer_type) or nested.get(FULL) or (others[0] if len(others) == 1 else {})
    params = dict(params)
    partial = params.get("partial_rotary_factor")
    if head_dim and partial and int(args.head_dim * partial) == head_dim:
        # MLA rotates qk_rope_head_dim dims (head_dim here); a partial factor stating the same share of the config's
        # head_dim (dots.llm3: 16 x 0.5 = 8) is that, not a second fraction of it
        params.pop("partial_rotary_factor")
    local = getattr(args, "rope_local_base_freq", None)
    if layer_type == SLIDING and local is not None and "rope_theta" not in params:
        params = {"rope_type": "default", "rope_theta": local}
    view = {
        "rope_parameters": params,
        "rope_theta": getattr(args, "rope_theta", None),
        "partial_rotary_factor": getattr(args, "partial_rotary_factor", None),
        "head_dim": head_dim or args.head_dim,
        "hidden_size": args.hidden_size,
        "num_attention_heads": args.num_attention_heads,
        "max_position_embeddings": args.max_position_embeddings,
        "original_max_position_embeddings": getattr(args, "original_max_position_embeddings", None),
    }
    return RopeConfig.from_dict({k: v for k, v in view.items() if v is not None}, head_dim=head_dim or args.head_dim)


def import_file(path: Path, name: str) -> ModuleType:
    """Import a Python file as module `name` (registered in sys.modules: dataclasses resolve annotations there)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[name] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def require_kernels(model_type: str, ops: Sequence[str], adapter_file: str) -> None:
    """Refuse to build an adapter whose kernel stubs (`kernels/<op>.py` beside its `adapters/` folder) do not set
    `IMPLEMENTED = True` yet: no silent fallback."""
    root = Path(adapter_file).resolve().parent.parent
    for op in ops:
        file = root / "kernels" / f"{op}.py"
        implemented = False
        if file.is_file():
            implemented = bool(getattr(import_file(file, f"_onboard_stub_{op}"), "IMPLEMENTED", False))
        if not implemented:
            raise NotRunnable(
                f"the {model_type} adapter is not runnable until kernels/{op}.py is implemented "
                f"({'stub present, IMPLEMENTED = False' if file.is_file() else f'{file} missing'})",
                f"write {op}_reference and {op}_triton in kernels/{op}.py, make tests/kernels/test_{op}.py pass, "
                f"set IMPLEMENTED = True and wire the op into the adapter where it says TODO(kernels/{op}.py)",
            )


class KVCache:
    """Keys and values of every layer for incremental decoding: each `forward(..., cache=...)` appends its tokens."""

    def __init__(self) -> None:
        self.layers: list[LayerKV] = []
        self.length = 0  # tokens cached so far (per row, padding included)


class AdapterModel(nn.Module):
    """Base of generated models: `model` (embed_tokens, layers, norm), `lm_head`, and `rotary`, one RotaryEmbedding
    per rope kind (each layer's `rope_kind`, None for NoPE layers)."""

    MODEL_TYPE: ClassVar[str] = ""
    REQUIRED_KERNELS: ClassVar[tuple[str, ...]] = ()
    WEIGHT_MAP: ClassVar[tuple[WeightRule, ...]] = ()
    DROPPED: ClassVar[tuple[str, ...]] = (r".*rotary_emb\.inv_freq",)
    Args: ClassVar[type]
    ADAPTER_FILE: ClassVar[str] = __file__

    model: nn.Module
    lm_head: nn.Module
    rotary: nn.ModuleDict

    @classmethod
    def from_pretrained(
        cls,
        path: str | Path,
        dtype: torch.dtype = torch.float32,
        device: str | torch.device = "cpu",
        *,
        trust_remote_code: bool = False,
    ) -> AdapterModel:
        """Build from `path/config.json` and fill every parameter from `path/*.safetensors` (strict).
        `trust_remote_code` mirrors transformers' keyword: an adapter never runs repository code, so True is refused."""
        if trust_remote_code:
            raise ValueError("generated adapters never run repository code: call with trust_remote_code=False")
        path = Path(path)
        config_file = path / "config.json"
        try:
            config = json.loads(config_file.read_text())
        except FileNotFoundError as exc:
            raise ConfigError(f"{config_file}: not found", "point at a checkpoint folder with config.json") from exc
        except ValueError as exc:
            raise ConfigError(f"{config_file}: not valid JSON ({exc})", "fix or re-save config.json") from exc
        config = language_model_config(config)
        # Missing kernels first: a stubbed adapter's fields are placeholders, so their errors would hide the stubs.
        require_kernels(cls.MODEL_TYPE, cls.REQUIRED_KERNELS, cls.ADAPTER_FILE)
        args = cls.Args.from_dict(config)
        _check_buildable(cls, args, path)
        previous = torch.get_default_dtype()
        torch.set_default_dtype(dtype)
        try:
            with torch.device(device):
                model = cls(args)
        finally:
            torch.set_default_dtype(previous)
        dropped = cls.DROPPED + ((r"lm_head\.weight",) if getattr(args, "tie_word_embeddings", False) else ())
        # Multi-token-prediction layers ship after the last decoder layer (DeepSeek-V3's layer 61); inference
        # without speculative decoding does not use them, as in transformers.
        mtp_layers = int(getattr(args, "num_nextn_predict_layers", 0) or 0)
        first_mtp = args.num_hidden_layers
        dropped += tuple(rf"model\.layers\.{k}\..*" for k in range(first_mtp, first_mtp + mtp_layers))
        load_weights(model, path, cls.WEIGHT_MAP, dropped)
        return model.eval()

    def __init__(self, args: Any) -> None:
        super().__init__()
        require_kernels(self.MODEL_TYPE, self.REQUIRED_KERNELS, self.ADAPTER_FILE)
        self.args = args

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        cache: KVCache | None = None,
        return_hidden_states: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        """input_ids [batch, seq] -> logits [batch, seq, vocab] (float32).

        attention_mask [batch, cached + seq] (1 real, 0 padding): each row's rotary positions start at its first real
        token, and padding keys are hidden. cache: continue from its tokens and append these.
        return_hidden_states: also return (embeddings, output of each layer)."""
        batch, seq = input_ids.shape
        past = cache.length if cache is not None else 0
        if attention_mask is not None and tuple(attention_mask.shape) != (batch, past + seq):
            raise ValueError(
                f"attention_mask has shape {tuple(attention_mask.shape)}, expected ({batch}, {past + seq}): "
                "cached tokens plus this call's"
            )
        key_mask = None
        if attention_mask is not None and not bool(attention_mask.all()):
            key_mask = attention_mask.bool()
            positions = padded_positions(attention_mask)[:, past:]
        else:  # the unpadded path stays exactly what it was: positions past..past+seq-1, no key mask
            positions = torch.arange(past, past + seq, device=input_ids.device)[None]
        tables = {kind: rotary(positions) for kind, rotary in self.rotary.items()}
        if cache is not None and not cache.layers:
            cache.layers = [LayerKV() for _ in self.model.layers]
        # Layers attending over an earlier layer's keys and values (`kv_source`, Gemma 4) read that layer's cache;
        # without a cache, the source layers keep this call's keys and values in one made for the call.
        sources = {
            i: layer.kv_source
            for i, layer in enumerate(self.model.layers)
            if getattr(layer, "kv_source", None) is not None
        }
        kv = list(cache.layers) if cache is not None else [None] * len(self.model.layers)
        for i, j in sources.items():
            kv[j] = kv[j] or LayerKV()
            kv[i] = kv[j]
        x = self.model.embed_tokens(input_ids)
        project_in = getattr(self.model, "project_in", None)
        if project_in is not None:  # OPT-350m: embeddings narrower than the layers, projected to their width
            x = project_in(x)
        learned_positions = getattr(self.model, "embed_positions", None)
        if learned_positions is not None:  # GPT-2 style absolute positions (composed adapters)
            x = x + learned_positions(positions).to(x.dtype)
        embed_norm = getattr(self.model, "embed_norm", None)
        if embed_norm is not None:  # NanoChat normalises the embeddings before the first layer
            x = embed_norm(x)
        per_layer = getattr(self.model, "per_layer_inputs", None)  # Gemma 4's per-layer embeddings, [B, S, L, D]
        layer_inputs = per_layer(input_ids, x) if per_layer is not None else None
        hidden = [x]
        for i, layer in enumerate(self.model.layers):
            cos, sin = tables[layer.rope_kind] if layer.rope_kind is not None else (None, None)
            own = layer_inputs[:, :, i] if layer_inputs is not None else None
            x = layer(x, cos, sin, AttentionContext(key_mask, kv[i], positions, own))
            if return_hidden_states:
                hidden.append(x)
        if cache is not None:
            cache.length += seq
        logits = self.lm_head(self.model.norm(x))
        return (logits, tuple(hidden)) if return_hidden_states else logits


def padded_positions(attention_mask: torch.Tensor) -> torch.Tensor:
    """Rotary position of every token of a padded batch [B, S], counted from each row's first real token (as
    transformers' generate()); padding gets 0."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


def rotaries(
    args: Any, kinds: Sequence[str | None], head_dim: int | Mapping[str | None, int] | None = None
) -> nn.ModuleDict:
    """One RotaryEmbedding per rope kind the layers use (None: NoPE). `head_dim`: the rotated heads' size, for all
    kinds or per kind (Gemma 4's full-attention heads are wider); None: args.head_dim."""
    sizes = head_dim if isinstance(head_dim, Mapping) else dict.fromkeys(kinds, head_dim)
    return nn.ModuleDict(
        {kind: RotaryEmbedding(rope_config(args, kind, sizes[kind])) for kind in dict.fromkeys(kinds) if kind}
    )
