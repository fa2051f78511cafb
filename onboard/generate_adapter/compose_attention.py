"""The attention block's options in a composition: each mechanism a family's tensors, config keys or facts call for,
as keyword arguments of `Attention(...)` (sizes, projections and biases are compose.Composer.self_attention's)."""

from __future__ import annotations

from onboard.generate_adapter.compose_norms import qk_norm, sub_norm
from onboard.generate_adapter.compose_rules import ComposerState
from onboard.generate_adapter.weight_inference import Found, layer_target, templates


def attention_options(c: ComposerState) -> list[str]:
    feats, r = set(c.p.features), c.roles
    kw = []
    scale = c.fact("attention_scale")
    if scale is not None:
        kw.append(f"scale={scale}")
    elif "attention_multiplier" in feats:
        kw.append(f"scale={c.fields.need('attention_multiplier', 'float', '1.0')}")
    elif "query_pre_attn_scalar" in feats:
        kw.append(f"scale={c.fields.need('query_pre_attn_scalar', 'float', '256')}**-0.5")
    if any(layer.attention == "sliding" for layer in c.p.layers):
        kw.append("sliding_window=window")
        c.words.append("sliding window")
    if any(layer.attention == "chunked" for layer in c.p.layers):
        chunk = c.fields.need("attention_chunk_size", "int | None", "None")
        kw.append(f"chunk_size={chunk} if layer_type == CHUNKED else None")
        c.words.append("chunked local attention")
    if "alibi" in feats:  # BLOOM, MPT: linear biases by key position instead of a rotary embedding
        kw.append("alibi=True")
        c.words.append("ALiBi")
    if "attn_softcap" in feats:
        kw.append(f"softcap={c.fields.need('attn_logit_softcapping', 'float | None', 'None')}")
    if r.get("attn.sinks", None) is not None:
        sinks = r.get("attn.sinks", None)
        c.wm.add(layer_target("self_attn.sinks"), (sinks.source,))  # type: ignore[union-attr]
        kw.append(f"sinks={_sink_layers(c, sinks)}")  # type: ignore[arg-type]
        c.words.append("attention sinks")
    qk = qk_norm(c)
    weightless = c.fact("weightless_qk_norm")
    if qk is None and weightless == "rotary layers, use_qk_norm":  # Llama 4
        use = c.fields.need("use_qk_norm", "bool", "True")
        qk = f"qk_norm=QKNormSpec({c.eps()}, weight=False) if {use} and self.rope_kind is not None else None"
        c.words.append("QK-norm without weight on the rotary layers")
    elif qk is None and weightless:  # nothing stored to show it (NanoChat)
        qk = f"qk_norm=QKNormSpec({c.eps()}, weight=False)"
        c.words.append("QK-norm without weight")
    if qk:
        kw.append(qk)
        if c.fact("qk_norm_after_rope"):
            kw.append("qk_norm_after_rope=True")
            c.words.append("QK-norm after the rotary embedding")
    if c.fact("rope_interleaved"):
        kw.append("rope_interleaved=True")
    if c.fact("rope_inverted"):
        kw.append("rope_inverted=True")
    scale = c.fact("nope_query_scale")
    if scale is not None:  # Beam: its code's constants, on the layers without rotary
        kw.append(f"nope_query_scale={tuple(scale)!r}")  # type: ignore[arg-type]
        c.words.append("queries scaled by position on the layers without rotary")
    if "nope_temperature" in feats:  # Llama 4's temperature tuning, on the layers without rotary
        f = c.fields
        tuning = f.need("attn_temperature_tuning", "bool", "True")
        pair = f"({f.need('floor_scale', 'float', '8192.0')}, {f.need('attn_scale', 'float', '0.1')})"
        kw.append(f"nope_temperature={pair} if {tuning} else None")
        c.words.append("query temperature tuning on the layers without rotary")
    if c.fact("v_norm"):  # Gemma 4: values RMS-normalised without a weight (no tensor shows it)
        kw.append(f"v_norm_eps={c.eps()}")
        c.words.append("values normalised without a weight")
    if c.has_key("key_multiplier"):  # Falcon-H1's muP: keys scaled after their projection
        kw.append(f"key_multiplier={c.fields.need('key_multiplier', 'float', '1.0')}")
    if c.has_key("clip_qkv"):
        kw.append(f"clip_qkv={c.fields.need('clip_qkv', 'float | None', 'None')}")
    output_norm = sub_norm(c, "attn")
    if output_norm:
        kw.append(output_norm.removeprefix(", "))
    lambdas = r.parts("attn.lambda")
    if lambdas:  # the Differential Transformer's learned lambda (DiffLlama)
        for part in lambdas:
            c.wm.add(layer_target(f"self_attn.{part.part}"), (part.source,))
        if len(lambdas) != 4:
            c.stub(
                "differential_attention",
                f"differential attention needs lambda_q1, lambda_k1, lambda_q2 and lambda_k2: {templates(*lambdas)}",
            )
        kw.append(f"differential=True, layer_index=i, norm_eps={c.eps()}")
        c.words.append("differential attention (DiffLlama)")
    gate, gate_bias = r.get("attn.gate"), r.get("attn.gate_bias", None)
    fn = "sigmoid"
    if gate is None and r.get("attn.g_gate") is not None:  # g_proj: sigmoid or softplus, only the code says
        fn = str(c.fact("attention_gate_fn") or "")
        if fn in ("sigmoid", "softplus"):
            gate = r.get("attn.g_gate")
        else:
            c.stub(
                "attention_g_proj",
                f"{r.get('attn.g_gate').template}: an output gate whose function (sigmoid, "  # type: ignore[union-attr]
                "softplus) only the family's code says (compose_knowledge: attention_gate_fn)",
            )
        if c.has_key("gating"):  # per head or per channel: the gate's rows show which
            c.fields.need("gating", "bool | str", "True")
    per_head = False
    if gate is not None:
        c.wm.add(layer_target("self_attn.gate_proj.weight"), (gate.source,))
        per_head = bool(gate.shape) and gate.shape[0] == c.p.dims.num_attention_heads
        kw.append(
            "gate_proj=True"
            + (", gate_per_head=True" if per_head else "")
            + (f', gate_fn="{fn}"' if fn != "sigmoid" else "")
        )
        c.words.append(f"{fn} output gate (gate_proj" + (", one per head)" if per_head else ")"))
    if gate_bias is not None and (gate is None or per_head):
        c.stub("attention_gate_bias", f"{gate_bias.template}: a gate bias without an elementwise gate_proj")
    elif gate_bias is not None:
        c.wm.add(layer_target("self_attn.gate_bias"), (gate_bias.source,))
        kw.append("gate_bias=True")
        c.words.append("a bias per head on the gate")
    return kw


def _sink_layers(c: ComposerState, sinks: Found) -> str:
    """True, or the one layer type storing sinks (MiMo-V2-Flash: sliding)."""
    kinds = [layer.attention for layer in c.p.layers]
    if sinks.count in (0, len(kinds)):
        return "True"
    for kind, name in (("sliding", "SLIDING"), ("full", "FULL")):
        if sinks.count == kinds.count(kind) and len(set(kinds)) > 1:
            c.words.append(f"sinks on {kind} layers")
            return f"layer_type == {name}"
    c.stub(
        "sinks_per_layer",
        f"attention sinks on {sinks.count} of {len(kinds)} layers, not one layer type's: {sinks.template}",
    )
    return "True"
