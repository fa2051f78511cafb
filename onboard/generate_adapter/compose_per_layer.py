"""Per-layer embeddings (Gemma 4's PLE): a second token table with one vector per layer (model level), and a gate
in each layer adding its vector to the residual after the MLP. One half without the other is a stub.
"""

from __future__ import annotations

from onboard.generate_adapter.compose_rules import ComposerState
from onboard.generate_adapter.weight_inference import layer_target

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
