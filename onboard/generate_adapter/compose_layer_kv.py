"""Layers that differ in their keys and values, in config.json's terms (Gemma 4): per-layer attention sizes
(`per_layer_config`), layers attending over an earlier layer's keys and values (`num_kv_shared_layers`), keys that
are also the values (`attention_k_eq_v`), a wider MLP on KV-shared layers (`use_double_wide_mlp`), and a stored
scalar on each layer's output. Each key is read where the tensors show its effect; a disagreement is a stub.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from onboard.generate_adapter.compose_layers import ATTENDING
from onboard.generate_adapter.compose_rules import ComposerState

# The per-kind rotary sizes when layers differ in head size: each kind's table built for its own layers' heads.
PER_KIND_ROTARY = "head_dims(self.model.layers)"


@dataclass
class KVLayout:
    """What the composition's layers read of the keys above (empty: every layer alike)."""

    per_layer_args: bool = False
    kv_source: str | None = None  # the layer whose keys and values layer i reads (None: its own)
    values_from_keys: str | None = None  # True where the values are the keys (no value projection)
    mlp_width: str | None = None  # replaces args.intermediate_size (double-wide MLP on the KV-shared layers)
    layer_scalar: bool = False

    @property
    def partial_kv(self) -> bool:
        """Some layers store no value projection, or neither key nor value: q/k/v fused from what each stores."""
        return self.kv_source is not None or self.values_from_keys is not None

    def attention_options(self) -> list[str]:
        kw = []
        if self.values_from_keys:
            kw.append(f"values_from_keys={self.values_from_keys}")
        if self.kv_source:
            kw.append("kv_shared=self.kv_source is not None")
        return kw


# The keys, as ModelArgs fields, read whenever config.json has them (even where the tensors show them neutral).
KEYS = {"num_kv_shared_layers": ("int", "0"), "attention_k_eq_v": ("bool", "False"),
        "use_double_wide_mlp": ("bool", "False")}  # fmt: skip


def layer_kv(c: ComposerState) -> KVLayout:
    out = KVLayout()
    read = {key: c.fields.need(key, *spec) for key, spec in KEYS.items() if c.has_key(key)}
    attending = [layer for layer in c.p.layers if layer.attention in ATTENDING]
    own = [layer for layer in attending if layer.kv_source is None and layer.kv_width is not None]
    if c.has_key("per_layer_config"):
        c.fields.need("per_layer_config", "dict[str, Any] | None", "None")
        out.per_layer_args = True
        c.rotary_head_dim = PER_KIND_ROTARY
        c.words.append("per-layer attention sizes (per_layer_config)")
    k = c.roles.get("attn.k")
    shared = [layer.index for layer in attending if layer.kv_source is not None]  # inspect, from config.json
    bare = [layer.index for layer in attending if layer.kv_width is None]  # no k/v projection stored
    if k is not None and (shared or k.count < len(attending)):
        tail = list(range(len(c.p.layers) - len(shared), len(c.p.layers)))
        if "num_kv_shared_layers" not in read or shared != tail or not set(bare) <= set(shared):
            c.stub(
                "kv_shared_layers",
                f"layers {bare or shared} attend over another layer's keys and values: in the "
                "block library only as the last num_kv_shared_layers layers reading the last earlier layer of "
                "their type (Gemma 4), the others storing their own k/v projections",
            )
        else:
            out.kv_source = f"kv_shared_source(args.layer_types, {read['num_kv_shared_layers']}, i)"
            c.words.append("the last layers attend over an earlier layer's keys and values")
            if "use_double_wide_mlp" in read:
                wide = read["use_double_wide_mlp"]
                out.mlp_width = f"args.intermediate_size * (2 if {wide} and self.kv_source is not None else 1)"
            _drop_unused_kv(c, sorted(set(shared) - set(bare)))
    _values_from_keys(c, out, own, read.get("attention_k_eq_v"))
    if c.roles.get("layer_scalar") is not None:
        out.layer_scalar = True
        c.words.append("a stored scalar on each layer's output")
    return out


def _drop_unused_kv(c: ComposerState, layers: list[int]) -> None:
    """KV-shared layers that still store their own k/v projections and norms (transformers ignores them on load,
    _keys_to_ignore_on_load_unexpected): deliberately not used, and left out of the fused q/k/v as well."""
    if not layers:
        return
    k = c.roles.get("attn.k")
    prefix = k.source.split("{i}")[0] if k is not None else "model.layers."  # e.g. model.layers.
    indices = "|".join(str(i) for i in layers)
    c.roles.dropped.append(rf"{re.escape(prefix)}(?:{indices})\.self_attn\.(?:k_proj|v_proj|k_norm|v_norm)\..*")
    c.words.append(f"the unused k/v projections of KV-shared layers {layers} dropped")


def _values_from_keys(c: ComposerState, out: KVLayout, own: list, flag: str | None) -> None:
    """`attention_k_eq_v`: on which of the layers with their own keys the values are the keys, from which of them
    store a value projection (Gemma 4: the full-attention layers store none). Where the KV-shared layers also store
    (unused) projections, they are counted with the layers storing keys: their layout mirrors their sources'."""
    k, v = c.roles.get("attn.k"), c.roles.get("attn.v")
    if k is None or k.count == (v.count if v is not None else 0):
        return  # every layer with keys has values too: nothing to read
    v_count = v.count if v is not None else 0
    if k.count != len(own):  # the shared layers store keys too
        own = [layer for layer in c.p.layers if layer.attention in ATTENDING]
    if flag is None:
        c.stub(
            "values_from_keys",
            f"{k.count} layers store keys but only {v_count} store values, and no "
            "attention_k_eq_v in config.json says the values are the keys",
        )
        return
    sliding = sum(layer.attention == "sliding" for layer in own)
    if v_count == 0:
        out.values_from_keys = flag
    elif v_count == sliding and sliding < len(own):
        out.values_from_keys = f"{flag} and layer_type != SLIDING"
    else:
        c.stub(
            "values_from_keys",
            f"{len(own) - v_count} of {len(own)} layers with keys store no values, not the "
            "full-attention layers (attention_k_eq_v acts on those)",
        )
        return
    c.words.append("keys as values where no value projection is stored")
