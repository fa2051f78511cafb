"""Composed families whose every mechanism is shown load-bearing: the adapter passes parity in float32 and
bfloat16, and a copy with any one mechanism taken out (a keyword argument of the adapter replaced) fails it; where
family facts carry what the tensors cannot show, composing without them fails or is refused by name. Also the
refusals and checkpoint variants of those families (Gemma 4's experts beside the MLP and KV-shared layers that
store unused projections, Laguna's router weight on input)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from onboard.generate_adapter import generate
from onboard.generate_adapter.parity import check_parity, load_adapter
from onboard.generate_adapter.plan import plan
from onboard.inspect_checkpoint import inspect
from tests.generate.conftest import composed_adapter, copy_tiny, edit_config, within_tolerance, without_family_fact


def test_llama4_text_composes_and_each_mechanism_is_load_bearing(tiny, tmp_path: Path) -> None:
    """Llama 4 text: chunked local attention on the rotary layers, temperature-tuned queries on the NoPE layers
    (floor_scale 8 in the tiny config, so it grows within the parity prompts), an L2 QK-norm after the interleaved
    rotary on the rotary layers, experts reading their sigmoid routing weight times the token, and the dense layers'
    own width (intermediate_size_mlp). Parity passes in float32 and bfloat16; the adapter with any one of these
    mechanisms taken out fails it, and so does composing without the family facts."""
    ckpt, source = _composed_passing_parity(tiny, "llama4_text", tmp_path)
    flat = " ".join(source.split()).replace("( ", "(").replace(" )", ")")
    assert "GatedMLP(args.hidden_size, args.intermediate_size_mlp" in flat
    taken_out = {
        "chunk_size=args.attention_chunk_size if layer_type == CHUNKED else None": "chunk_size=None",
        "nope_temperature=(args.floor_scale, args.attn_scale) if args.attn_temperature_tuning else None": "nope_temperature=None",
        "qk_norm=(QKNormSpec(args.rms_norm_eps, weight=False) if args.use_qk_norm and self.rope_kind is not None "
        "else None)": "qk_norm=None",
        "weights_on_input=True": "weights_on_input=False",
        "rope_interleaved=True": "rope_interleaved=False",
    }
    _each_taken_out_fails_parity(ckpt, source, taken_out, tmp_path)
    _fails_without_family_facts(ckpt, "llama4_text", tmp_path)


def _fails_without_family_facts(ckpt: Path, model_type: str, tmp_path: Path) -> None:
    """Without the family's facts, composition refuses by name (a stub) or its adapter fails parity."""
    with without_family_fact(model_type):
        if plan(inspect(str(ckpt))).stubs:
            return
        plain = composed_adapter(ckpt, tmp_path / "no-fact")
    assert not check_parity(plain, ckpt)["passed"]


def _composed_passing_parity(tiny, model_type: str, tmp_path: Path) -> tuple[Path, str]:  # type: ignore[no-untyped-def]
    """(checkpoint, adapter source) of `model_type`'s tiny checkpoint, composed; parity passes in float32 (generate's
    own check) and in bfloat16."""
    ckpt = copy_tiny(tiny, model_type, tmp_path)
    result = generate(ckpt, tmp_path / "out", parity=True)
    assert result.parity["passed"], result.parity["detail"]
    adapter = tmp_path / "out" / "adapters" / f"{model_type}.py"
    assert within_tolerance(check_parity(adapter, ckpt, "bfloat16"))
    return ckpt, adapter.read_text()


def _each_taken_out_fails_parity(ckpt: Path, source: str, taken_out: dict[str, str], tmp_path: Path) -> None:
    """Each mechanism of `taken_out` (a keyword argument as the adapter reads it, whitespace collapsed) replaced in
    its own copy of the adapter: every copy fails parity."""
    for n, (mechanism, without) in enumerate(taken_out.items()):
        variant = tmp_path / f"without-{n}" / "adapters" / Path(ckpt.name).with_suffix(".py").name
        variant.parent.mkdir(parents=True)
        variant.write_text(_without(source, mechanism, without))
        assert not check_parity(variant, ckpt)["passed"], mechanism


def _without(source: str, mechanism: str, replacement: str) -> str:
    """`source` with the keyword argument `mechanism` (as it reads once whitespace is collapsed) replaced."""
    pattern = r"\s*".join(re.escape(token) for token in mechanism.replace("(", " ( ").replace(")", " ) ").split())
    changed, count = re.subn(pattern, replacement, source)
    assert count >= 1, mechanism
    return changed


# Mechanisms of a composed family, each as the adapter reads it (whitespace collapsed) and what replaces it to take it
# out: parity passes in float32 and bfloat16, and the adapter with any one of them taken out fails it (those the
# tensors' shapes enforce fail at load, which parity reports as a failure too); with family facts, composing without
# them fails too.
# Post-LN layers, norm(x + f(x)), and no norm after the last layer (GPT-1, OPT with do_layer_norm_before off).
POST_LN = {
    "x = self.post_attention_layernorm(x + self.self_attn(x, cos, sin, ctx))":
        "x = x + self.post_attention_layernorm(self.self_attn(x, cos, sin, ctx))",
    "return self.post_feedforward_layernorm(x + self.mlp(x))": "return x + self.post_feedforward_layernorm(self.mlp(x))",
    "self.model.norm = nn.Identity()": "self.model.norm = nn.LayerNorm(args.hidden_size, elementwise_affine=False)",
    "args.hidden_act, bias=True)": '"gelu" if args.hidden_act == "gelu_new" else args.hidden_act, bias=True)',
}  # fmt: skip
LOAD_BEARING: dict[str, dict[str, str]] = {
    # Falcon-H1: a Mamba-2 mixer beside attention in every layer, both reading one norm's output, their outputs scaled
    # and summed into the residual; muP multipliers on the mixer's input and in_proj parts, on the keys and on the
    # MLP's gate and output. The tiny config sets each multiplier off 1 and the gated norm on.
    "falcon_h1": {
        "key_multiplier=args.key_multiplier": "key_multiplier=None",
        "in_multiplier=args.ssm_in_multiplier": "in_multiplier=1.0",
        "zxbcdt_multipliers=args.ssm_multipliers": "zxbcdt_multipliers=None",
        "multipliers=args.mlp_multipliers": "multipliers=None",
        "norm_before_gate=args.mamba_norm_before_gate": "norm_before_gate=True",
        "self.mixer_scales = (args.attention_in_multiplier, args.attention_out_multiplier, args.ssm_out_multiplier)":
            "self.mixer_scales = (args.attention_in_multiplier, args.attention_out_multiplier, 1.0)",
    },
    # Gemma 4 (unified text): full-attention layers with their own head size and KV heads (per_layer_config) whose
    # keys are their values (attention_k_eq_v: no v_proj stored), the last two layers attending over the keys and
    # values of the last earlier layer of their type (num_kv_shared_layers: no k/v projections stored) with a
    # double-wide MLP there, values normalised without a weight, q·k unscaled, a stored scalar on each layer's output.
    "gemma4_unified_text": {
        "v_norm_eps=args.rms_norm_eps": "v_norm_eps=None",
        "scale=1.0": "scale=None",
        "* self.layer_scalar": "",
        "values_from_keys=args.attention_k_eq_v and layer_type != SLIDING": "values_from_keys=False",
        "self.kv_source = kv_shared_source(args.layer_types, args.num_kv_shared_layers, i)": "self.kv_source = None",
        "args = args.for_layer(i)": "",
        "head_dim=head_dims(self.model.layers)": "",
    },
    # Gemma 4 text (E2B / E4B): per-layer embeddings, a second token table and a projection of the embeddings mixed
    # into one vector per token and layer, each layer gating its own into the residual after the MLP.
    "gemma4_text": {
        "x = x + self.per_layer(x, ctx.layer_input if ctx is not None else None)": "",
        "norm(args, args.hidden_size_per_layer_input)": "nn.Identity()",
        "scale=1.0": "scale=None",
    },
    # Laguna: an output gate softplus(g_proj(x)) per head (a family fact: the tensors cannot say softplus), query
    # heads per layer, sigmoid routing over soft-capped router logits with a correction bias, routed experts scaled.
    "laguna": {
        'gate_fn="softplus"': 'gate_fn="sigmoid"',
        "logit_softcap=args.moe_router_logit_softcapping": "logit_softcap=0.0",
        "routed_scaling_factor=args.routed_scaling_factor": "routed_scaling_factor=1.0",
        "args.num_attention_heads_per_layer[i] if args.num_attention_heads_per_layer else args.num_attention_heads":
            "args.num_attention_heads",
    },
    # Lara-mini: Qwen3.5's Gated DeltaNet stored with one input projection [q | k | v | z | b | a] (split by rows at
    # load) and its gated norm named out_norm; rotary on the sliding-window layers only (inspect's layer plan: its
    # full-attention layers are NoPE).
    "lara_mini": {
        '"fused_rows"': '"grouped_rows"',
        "self.rope_kind = layer_type if (True, True, True, False)[i % 4] else None": "self.rope_kind = layer_type",
    },
    # OLMo-hybrid: Gated DeltaNet in FLA's layout on the linear-attention layers, pre-norm there and post-norm (OLMo
    # 2's) on the attention layers, one stored norm (feedforward_layer_norm) before the MLP in the first and on the
    # attention output in the second; beta doubled (linear_allow_neg_eigval); the gated norm at FLA's eps (a fact).
    "olmo_hybrid": {
        "allow_neg_eigval=args.linear_allow_neg_eigval": "allow_neg_eigval=False",
        "x = x + self.post_attention_layernorm(self.self_attn(x, cos, sin, ctx))":
            "x = x + self.self_attn(self.post_attention_layernorm(x), cos, sin, ctx)",
    },
    # ModernBERT-decoder: a LayerNorm on the embeddings, none before layer 0's attention, fused [act; gate] MLP rows
    # (Wi), and a prediction head norm(act(dense(x))) before the tied projection with its own bias.
    "modernbert-decoder": {
        "HeadTransform(args.hidden_size, args.classifier_activation,": 'HeadTransform(args.hidden_size, "relu",',
        "norm(args, args.hidden_size) if i else nn.Identity()": "norm(args, args.hidden_size)",
    },
    # dots.llm3 (Dots3Note): DeepSeek's latent attention with the normed q / kv latents scaled by sqrt(hidden / rank)
    # at rms_norm_eps (its code: family facts), an RMSNorm on the shared rotary key head, a sigmoid gate per head
    # (g_proj) before o_proj, and GLM-MoE-DSA's interleaved rotary in the attention and its top-k indexer.
    "dots3_note_text": {
        "latent_scale=True": "latent_scale=False",
        "rms_norm_eps=args.rms_norm_eps, bias=False": "rms_norm_eps=MLA_LATENT_NORM_EPS, bias=False",
        "k_rope_norm_eps=args.rms_norm_eps": "k_rope_norm_eps=None",
        "head_gate=True": "head_gate=False",
        "rope_interleaved=True, indexer=": "rope_interleaved=False, indexer=",
        "args.index_topk, rope_interleaved=True)": "args.index_topk)",
    },
    # GPT-1: post-LN layers (the residual sums normalised, by the norms a pre-norm layer would store), no final norm,
    # its afn "gelu" being the tanh approximation (numerics.FAMILY_ACTIVATION_NAMES), learned positions_embed.
    "openai-gpt": POST_LN,
}  # fmt: skip


@pytest.mark.parametrize("model_type", list(LOAD_BEARING))
def test_each_mechanism_of_a_composed_family_is_load_bearing(tiny, tmp_path: Path, model_type: str) -> None:
    from onboard.generate_adapter.compose_knowledge import FAMILY_FACTS

    ckpt, source = _composed_passing_parity(tiny, model_type, tmp_path)
    _each_taken_out_fails_parity(ckpt, source, LOAD_BEARING[model_type], tmp_path)
    if model_type in FAMILY_FACTS:
        _fails_without_family_facts(ckpt, model_type, tmp_path)


def test_gemma4_experts_beside_the_dense_mlp(tmp_path: Path) -> None:
    """Gemma 4 26B-A4B's layout (enable_moe_block): routed experts beside each layer's dense MLP, reading the
    layer's residual through their own norm, a router on the weightless-normed residual with a learned scale and a
    scale per expert. Parity passes in float32 and bfloat16; experts reading the normed input instead of the
    residual, or one expert per token instead of top_k_experts, fail it; a config.json whose enable_moe_block is
    false while the checkpoint stores the experts is refused by name."""
    from tests.generate.conftest import perturb
    from tests.tiny.factory import make_tiny_checkpoint

    moe = {"enable_moe_block": True, "num_experts": 4, "top_k_experts": 2, "moe_intermediate_size": 24}
    ckpt = make_tiny_checkpoint("gemma4_text", tmp_path / "gemma4_text", overrides=moe)
    perturb(ckpt)
    adapter = composed_adapter(ckpt, tmp_path / "out")
    for dtype in ("float32", "bfloat16"):
        assert within_tolerance(check_parity(adapter, ckpt, dtype)), dtype
    taken_out = {
        "self.mlp(self.pre_feedforward_layernorm(x), x)": "self.mlp(self.pre_feedforward_layernorm(x), self.pre_feedforward_layernorm(x))",
        "args.top_k_experts": "1",
    }
    _each_taken_out_fails_parity(ckpt, adapter.read_text(), taken_out, tmp_path)
    edit_config(ckpt, enable_moe_block=False)
    refused = check_parity(adapter, ckpt)
    assert not refused["passed"] and "enable_moe_block" in refused["detail"], refused["detail"]


def test_laguna_router_weight_on_input_is_refused_by_name(tiny, tmp_path: Path) -> None:
    """Laguna's config documents moe_apply_router_weight_on_input, which its transformers code never reads: with it
    true, an engine that honours it computes another model than the reference, so the adapter refuses it by name."""
    ckpt = copy_tiny(tiny, "laguna", tmp_path)
    adapter = composed_adapter(ckpt, tmp_path / "out")
    assert check_parity(adapter, ckpt)["passed"]
    edit_config(ckpt, moe_apply_router_weight_on_input=True)
    refused = check_parity(adapter, ckpt)
    assert not refused["passed"] and "moe_apply_router_weight_on_input" in refused["detail"], refused["detail"]


def test_kv_shared_layers_storing_their_own_kv_projections(tiny, tmp_path: Path) -> None:
    """A Gemma 4 checkpoint whose KV-shared layers still store k/v projections and norms (transformers ignores them on
    load): inspect takes the sharing from config.json, composition drops those tensors by name and leaves them out of
    the fused q/k/v, and parity passes; they were a stub ("every layer stores its own key projection") before."""
    from safetensors.torch import load_file, save_file

    ckpt = copy_tiny(tiny, "gemma4_unified_text", tmp_path)
    tensors = load_file(str(ckpt / "model.safetensors"))
    g = torch.Generator().manual_seed(1)
    for shared, source in (
        (2, 0),
        (3, 1),
    ):  # each stores a copy-shaped k_proj (and v_proj, k_norm where its source does)
        for part in ("k_proj.weight", "v_proj.weight", "k_norm.weight"):
            like = tensors.get(f"model.layers.{source}.self_attn.{part}")
            if like is not None:
                tensors[f"model.layers.{shared}.self_attn.{part}"] = torch.randn(like.shape, generator=g)
    save_file(tensors, str(ckpt / "model.safetensors"), metadata={"format": "pt"})
    profile = inspect(str(ckpt))
    assert [layer.kv_source for layer in profile.layers] == [None, None, 0, 1]
    adapter = composed_adapter(ckpt, tmp_path / "out")
    source = adapter.read_text()
    dropped = load_adapter(adapter).Model.DROPPED
    assert r"model\.layers\.(?:2|3)\.self_attn\.(?:k_proj|v_proj|k_norm|v_norm)\..*" in dropped, dropped
    assert "(?:2|3)" in source
    for dtype in ("float32", "bfloat16"):
        assert within_tolerance(check_parity(adapter, ckpt, dtype)), dtype


def _composed_with_binding_clamp(ckpt: Path, tmp_path: Path) -> Path:
    """Set attn_config.clip_qkv to 0.5 (DBRX, MPT: the clamp then binds on the tiny activations), compose through
    generate, and return the adapter once parity passes in float32 (generate's check) and bfloat16."""
    config = json.loads((ckpt / "config.json").read_text())
    config["attn_config"]["clip_qkv"] = 0.5
    (ckpt / "config.json").write_text(json.dumps(config))
    result = generate(ckpt, tmp_path / "out", parity=True)
    assert result.parity["passed"], result.parity["detail"]
    adapter = tmp_path / "out" / "adapters" / f"{config['model_type']}.py"
    assert within_tolerance(check_parity(adapter, ckpt, "bfloat16"))
    return adapter


def test_dbrx_composes_and_each_mechanism_is_load_bearing(tiny, tmp_path: Path) -> None:
    """DBRX: its hyperparameters nested in attn_config / ffn_config (read as the model's own keys), experts stored
    by rows ([experts x intermediate, hidden] for w1, v1 and w2, w2 transposed), q/k/v clamped to ±clip_qkv (set to
    0.5 so the clamp binds on the tiny activations), LayerNorms without bias, top-k weights renormalised by their sum
    (moe_normalize_expert_weights 1). A p-norm other than 1 is refused by name at load."""
    ckpt = copy_tiny(tiny, "dbrx", tmp_path)
    features = inspect(str(ckpt)).features  # gated experts (w1 gate, v1 up) and bias-free LayerNorms, as inspected
    assert "layernorm" in features and "plain_mlp" not in features, features
    adapter = _composed_with_binding_clamp(ckpt, tmp_path)
    config = json.loads((ckpt / "config.json").read_text())
    taken_out = {
        "clip_qkv=args.clip_qkv": "clip_qkv=None",
        "norm_topk_prob=args.norm_topk_prob": "norm_topk_prob=False",
        "LayerNorm(dim, args.rms_norm_eps, bias=False)": "RMSNorm(dim, args.rms_norm_eps)",
    }
    _each_taken_out_fails_parity(ckpt, adapter.read_text(), taken_out, tmp_path)
    config["ffn_config"]["moe_normalize_expert_weights"] = 2.0
    (ckpt / "config.json").write_text(json.dumps(config))
    with pytest.raises(Exception, match="moe_normalize_expert_weights"):
        load_adapter(adapter).Model.from_pretrained(ckpt)


def test_mpt_composes_and_each_mechanism_is_load_bearing(tmp_path: Path) -> None:
    """MPT: ALiBi instead of a rotary embedding (6 heads, not a power of two: the slopes' interleaving matters),
    q/k/v clamped to ±clip_qkv (0.5: the clamp binds), bias-free LayerNorms named norm_1 / norm_2, a plain MLP with
    exact GELU (a family fact: MPT's config names no activation), attn_config read as the model's own keys. Parity
    passes in float32 and bfloat16; taking any mechanism out fails it, and so does composing without the fact."""

    from tests.generate.conftest import perturb
    from tests.tiny.factory import make_tiny_checkpoint

    ckpt = make_tiny_checkpoint("mpt", tmp_path / "mpt", overrides={"d_model": 48, "n_heads": 6})
    perturb(ckpt)
    assert {"alibi", "layernorm", "plain_mlp"} <= set(inspect(str(ckpt)).features)
    adapter = _composed_with_binding_clamp(ckpt, tmp_path)
    taken_out = {
        "alibi=True": "alibi=False",
        "clip_qkv=args.clip_qkv": "clip_qkv=None",
        "LayerNorm(dim, args.rms_norm_eps, bias=False)": "RMSNorm(dim, args.rms_norm_eps)",
    }
    _each_taken_out_fails_parity(ckpt, adapter.read_text(), taken_out, tmp_path)
    _fails_without_family_facts(ckpt, "mpt", tmp_path)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("alibi_bias_max", 4),
        ("attn_type", "multiquery_attention"),
        ("prefix_lm", True),
        ("qk_ln", True),
        ("softmax_scale", 0.1),
    ],
)
def test_mpt_values_the_blocks_cannot_express_are_refused_by_name(tiny, tmp_path: Path, key: str, value: object):
    """transformers' MPT builds multi-head, causal attention without QK-norm whatever attn_config says, and the
    block's ALiBi slopes are MPT's only at a maximum of 8: any other value is refused at load, naming the key, and
    inspect names its effect (config-kernel-fact) instead of calling it unknown."""
    ckpt = copy_tiny(tiny, "mpt", tmp_path)
    config = json.loads((ckpt / "config.json").read_text())
    config["attn_config"][key] = value
    (ckpt / "config.json").write_text(json.dumps(config))
    profile = inspect(str(ckpt))
    assert [
        f for f in profile.findings if f.code == "config-kernel-fact" and f.message.startswith(f"attn_config.{key} =")
    ]
    adapter = composed_adapter(ckpt, tmp_path / "out")
    with pytest.raises(Exception, match=key):
        load_adapter(adapter).Model.from_pretrained(ckpt)


def test_opt_350m_layout_composes_and_refuses_the_other_layout(tmp_path: Path) -> None:
    """OPT-350m's layout: do_layer_norm_before off and embeddings narrower than the layers (word_embed_proj_dim),
    projected in by project_in and out by project_out before the tied head. Inspect calls the layers post-LN, the
    composition normalises the residual sums with the same stored norms a pre-norm OPT has, and parity passes in
    float32 and bfloat16; each post-LN mechanism taken out fails it. The adapter refuses a pre-norm config, and one
    whose embeddings are as wide as the layers, by name (as a pre-norm OPT's adapter refuses these)."""
    from tests.generate.conftest import perturb
    from tests.tiny.factory import make_tiny_checkpoint

    overrides = {"do_layer_norm_before": False, "word_embed_proj_dim": 16}
    ckpt = make_tiny_checkpoint("opt", tmp_path / "opt", overrides=overrides)
    perturb(ckpt)
    profile = inspect(str(ckpt))
    assert profile.norms.placement == "post_ln" and "post_ln_norm" in profile.features
    result = generate(ckpt, tmp_path / "out", parity=True)
    assert result.parity["passed"], result.parity["detail"]
    adapter = tmp_path / "out" / "adapters" / "opt.py"
    assert "self.model.project_in = nn.Linear(" in adapter.read_text()
    assert within_tolerance(check_parity(adapter, ckpt, "bfloat16"))
    taken_out = {k: v for k, v in POST_LN.items() if "hidden_act" not in k}  # OPT's relu: no approximation to drop
    _each_taken_out_fails_parity(ckpt, adapter.read_text(), taken_out, tmp_path)
    for key, value in (("do_layer_norm_before", True), ("word_embed_proj_dim", 64)):
        config = edit_config(ckpt, **{key: value})
        with pytest.raises(Exception, match=key):
            load_adapter(adapter).Model.from_pretrained(ckpt)
        edit_config(ckpt, **{key: overrides[key]})
    assert config["hidden_size"] == 64


def test_latent_attention_on_a_sliding_window_is_refused_by_name(tiny, tmp_path: Path) -> None:
    """dots.llm3 configs may give some layers `sliding_attention`: inspect keeps the window on those MLA layers (the KV
    cache is bounded there), and composition stubs it, since the MLA block attends to every earlier key."""
    ckpt = copy_tiny(tiny, "dots3_note_text", tmp_path)
    rope = json.loads((ckpt / "config.json").read_text())["rope_parameters"]["indexed_attention"]
    edit_config(
        ckpt,
        layer_types=["sliding_attention", "indexed_attention"],
        sliding_window=8,
        rope_parameters={"indexed_attention": rope, "sliding_attention": rope},
    )
    profile = inspect(str(ckpt))
    assert [(layer.attention, layer.window) for layer in profile.layers] == [("mla", 8), ("mla", None)]
    assert [stub.op for stub in plan(profile).stubs] == ["mla_sliding_window"]
