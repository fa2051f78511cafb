"""The model-level parts of a composition: embeddings narrower than the layers, the LM head (its tensors or its tie,
bias, logit scale, soft-cap, a transform before the projection), and Gemma 4's per-layer embeddings (PLE): a second
token table with one vector per layer, gated into each layer's residual after the MLP (one half alone is a stub)."""

from __future__ import annotations

from onboard.generate_adapter.compose_rules import ComposerState
from onboard.generate_adapter.weight_inference import layer_target


def embedding_projections(c: ComposerState) -> None:
    """Embeddings narrower than the layers (OPT-350m's word_embed_proj_dim): `model.project_in` to the layers' width,
    the head's transform (project_out) back."""
    pin, pout = c.roles.get("embed_project_in"), c.roles.get("embed_project_out")
    if pin is None and pout is None:
        return
    if pin is None or pout is None or not c.has_key("word_embed_proj_dim"):
        c.stub(
            "embedding_projection",
            "embeddings projected in or out need project_in, project_out and word_embed_proj_dim together",
        )
        return
    width = c.fields.need("word_embed_proj_dim", "int | None", "None")
    c.embed_width = f"({width} or args.hidden_size)"
    c.wm.add("model.project_in.weight", (pin.source,))
    c.wm.add("lm_head.transform.weight", (pout.source,))
    c.guard_tests["word_embed_proj_dim"] = (
        "self.word_embed_proj_dim in (None, self.hidden_size)",
        "embeddings as wide as the layers: this adapter was composed for narrower ones, projected in and out",
    )
    c.words.append("embeddings projected in and out of the layers' width")


def lm_head_options(c: ComposerState) -> list[str]:
    r, feats = c.roles, set(c.p.features)
    head, bias = r.get("head"), r.get("head", "bias")
    kw = []
    if head is not None:
        c.wm.add("lm_head.weight", (head.source,))
    elif not c.p.tie_word_embeddings:
        c.stub("lm_head", "no LM head tensor and tie_word_embeddings is false")
    if bias is not None:
        c.wm.add("lm_head.bias", (bias.source,))
    switched = c.switched_bias("head", bias is not None, [("lm_head.bias", (head.source,), "copy")] if head else [])
    if switched != "False":
        kw.append(f"bias={switched}")
    if c.has_key("logit_scale"):
        kw.append(f"scale={c.fields.need('logit_scale', 'float', '1.0')}")
    elif "logits_scaling" in c.p.config_keys:
        kw.append(f"scale=1.0 / {c.fields.need('logits_scaling', 'float', '1.0')}")
    elif c.has_key("dim_model_base"):  # MiniCPM: lm_head(hidden / (hidden_size / dim_model_base))
        base = c.fields.need("dim_model_base", "float | None", "None")
        kw.append(f"scale=({base} or args.hidden_size) / args.hidden_size")
    elif "logit_scaling" in feats:
        c.stub("logit_scaling", "logits are scaled by a constant no known config key holds")
    if "final_softcap" in feats:
        kw.append(f"final_softcap={c.fields.need('final_logit_softcapping', 'float | None', 'None')}")
    transform = r.parts("head_transform")
    if c.embed_width != "args.hidden_size":  # project_out, before the projection onto the vocabulary
        if transform:
            c.stub("head_transform", "a head transform beside project_out is not in the block library")
        kw.append(f"transform=nn.Linear(args.hidden_size, {c.embed_width}, bias=False)")
    elif transform:  # ModernBERT-decoder: dense, activation and norm before the projection
        if {f.part for f in transform} != {"dense", "norm"} or not c.has_key("classifier_activation"):
            c.stub(
                "head_transform", "a transform before the LM head needs its dense, its norm and classifier_activation"
            )
        else:
            for found in transform:
                c.wm.add(f"lm_head.transform.{found.part}.{found.param}", (found.source,))
            act = c.fields.need("classifier_activation", "str", '"gelu"')
            dense_bias = any(f.part == "dense" and f.param == "bias" for f in transform)
            kw.append(
                f"transform=HeadTransform(args.hidden_size, {act}, norm(args, args.hidden_size), bias={dense_bias})"
            )
            c.words.append("a dense, activation and norm before the LM head")
    return kw


MODEL_PARTS = {"embed_tokens_per_layer": "embed", "per_layer_model_projection": "projection",
               "per_layer_projection_norm": "norm"}  # fmt: skip
LAYER_PARTS = {"per_layer_input_gate": "gate", "per_layer_projection": "projection",
               "post_per_layer_input_norm": "norm"}  # fmt: skip


def per_layer_inputs(c: ComposerState) -> tuple[str | None, str | None]:
    """(the model's PerLayerInputs expression, the layer's PerLayerGate expression), or (None, None) without PLE."""
    model = {f.part: f for f in c.roles.parts("ple")}
    layer = {f.part: f for f in c.roles.parts("ple.layer")}
    if not model and not layer:
        return None, None
    missing = sorted(set(MODEL_PARTS) - model.keys()) + sorted(set(LAYER_PARTS) - layer.keys())
    if missing:
        c.stub("per_layer_inputs", f"per-layer embeddings without {', '.join(missing)}: the block reads all six")
        return None, None
    for part, name in MODEL_PARTS.items():
        c.wm.add(f"model.per_layer_inputs.{name}.weight", (model[part].source,))
    for part, name in LAYER_PARTS.items():
        c.wm.add(layer_target(f"per_layer.{name}.weight"), (layer[part].source,))
    dim = c.fields.need("hidden_size_per_layer_input", "int", None)
    vocab = c.fields.need("vocab_size_per_layer_input", "int", None)
    c.words.append("per-layer embeddings gated into each layer")
    model_expr = f"PerLayerInputs({vocab}, args.hidden_size, args.num_hidden_layers, {dim}, norm(args, {dim}))"
    return model_expr, f"PerLayerGate(args.hidden_size, {dim}, args.hidden_act, norm(args, args.hidden_size))"
