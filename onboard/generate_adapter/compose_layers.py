"""Which layer is which: each layer's type when config.json has no layer_types, and its rotary table, as expressions
over the layer index `i` (so one adapter serves deeper checkpoints of the family)."""

from __future__ import annotations

from onboard.generate_adapter.compose_mixers import FEED_FORWARD_LAYER_TYPES, LAYER_TYPE_NAMES
from onboard.generate_adapter.compose_rules import ComposerState, pattern_expr, refusal

ATTENDING = frozenset({"full", "sliding", "chunked", "mla"})  # inspect's mixer kinds that are attention


def layer_plan(c: ComposerState) -> tuple[str, str]:
    p, mixers = c.p, c.mixers
    kinds = []
    for layer in p.layers:
        if layer.attention in mixers:
            kinds.append(f'"{LAYER_TYPE_NAMES[layer.attention]}"')
        elif layer.attention == "none" and layer.mlp != "none":
            kinds.append(f'"{FEED_FORWARD_LAYER_TYPES[layer.mlp]}"')
        else:
            kinds.append({"sliding": "SLIDING", "chunked": "CHUNKED"}.get(layer.attention, "FULL"))
    layer_type = _mamba_layer_types(c) or (pattern_expr(kinds, str) if kinds else "FULL")
    if p.rope is None:
        _no_rotary(c)
        return layer_type, "None"
    attending = [kind for kind, layer in zip(kinds, p.layers, strict=True) if layer.attention in ATTENDING]
    base = "layer_type" if len(set(attending)) > 1 else "FULL"
    rope_kind = c.fact("rope_kind")
    if rope_kind is not None:
        return layer_type, str(rope_kind)
    # A layer that does not attend reads no rotary: it takes the attention layers' table, never a NoPE pattern.
    ropes = [layer.rope or layer.attention not in ATTENDING for layer in p.layers]
    if all(ropes) or not ropes:
        return layer_type, base
    c.words.append("NoPE layers")
    return layer_type, f"{base} if {pattern_expr(ropes, repr)} else None"


def _mamba_layer_types(c: ComposerState) -> str | None:
    """Which layers are Mamba, from the keys that say so when layer_types does not (None: no such key)."""
    ssm = LAYER_TYPE_NAMES["ssm"]
    if "ssm" in c.mixers and c.has_key("attn_layer_indices"):  # Bamba: the attention layers by index
        c.fields.need("attn_layer_indices", "list[int] | None", "None")
        return f'FULL if i in (self.attn_layer_indices or ()) else "{ssm}"'
    if "ssm" in c.mixers and c.has_key("attn_layer_period"):  # Jamba: one attention layer per period
        period, offset = (c.fields.need(k, "int", None) for k in ("attn_layer_period", "attn_layer_offset"))
        return f'FULL if i % {period} == {offset} else "{ssm}"'.replace("args.", "self.")
    return None


def _no_rotary(c: ComposerState) -> None:
    """No rotary table: say why, or stub the positions nothing provides."""
    p = c.p
    if "no_positions" in p.features:
        key = "position_embedding_type"
        # A config of the family asking for rotary is refused, not ignored (config.json's null hides the key from the
        # profile, so it is read whether or not this checkpoint sets it).
        c.fields.need(key, "str | None", "None")
        c.post_init.append(
            refusal(
                p.model_type,
                key,
                f'self.{key} not in (None, "nope", "none")',
                "rotary positions on a family composed without positional encoding",
            )
        )
        c.words.append("no positional encoding")
    elif not {"absolute_positions", "alibi"} & set(p.features) and any(
        layer.attention in ATTENDING for layer in p.layers
    ):  # a model of mixer layers only (Mamba-2) needs no positions
        c.stub("positions", "no rotary and no learned position embeddings recognised")
