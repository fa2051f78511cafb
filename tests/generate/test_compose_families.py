"""Families composed from the profile alone, one test per family or shared mechanism: what each needed of the block
library, the weight map or a family fact (compose_knowledge.FAMILY_FACTS), checked by generate's parity against
transformers; where a fact carries what the tensors cannot show, the same checkpoint composed without it is shown
to fail or to be refused by name. The composition machinery itself is tested in test_compose.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from onboard.generate_adapter import generate
from onboard.generate_adapter.adapter_source import adapter_source
from onboard.generate_adapter.loader import _combine
from onboard.generate_adapter.parity import check_parity, load_adapter
from onboard.generate_adapter.plan import plan
from onboard.generate_adapter.regenerate import ADAPTERS_DIR
from onboard.inspect_checkpoint import inspect
from tests.generate.conftest import composed_adapter, copy_tiny, edit_config, within_tolerance, without_family_fact


def test_afmoe_mup_input_scaling_composes(tiny, tmp_path: Path) -> None:
    """AFMoE with mup_enabled multiplies the embeddings by sqrt(hidden): inspect reports it, the composed adapter
    applies it (read from the config, so one adapter serves both settings) and parity passes."""
    ckpt = copy_tiny(tiny, "afmoe", tmp_path, "afmoe-mup")
    edit_config(ckpt, mup_enabled=True)
    profile = inspect(str(ckpt))
    assert "embedding_scaling" in profile.features
    assert profile.multipliers.embedding_multiplier == pytest.approx(profile.dims.hidden_size**0.5)
    generate(ckpt, tmp_path / "out")
    report = check_parity(tmp_path / "out/adapters/afmoe.py", ckpt)
    assert report["passed"], report["detail"]


def test_biogpt_offset_positions_and_the_eps_its_code_fixes(tiny, tmp_path: Path) -> None:
    """BioGPT looks position p up at row p + 2 and builds nn.LayerNorm(dim) (eps 1e-5) whatever layer_norm_eps says
    (1e-12 in its config): the composed adapter does both, and its positions match transformers' table."""
    from transformers.models.biogpt.modeling_biogpt import BioGptLearnedPositionalEmbedding

    from onboard.generate_adapter.composed_blocks import LearnedPositions

    ckpt = tiny("biogpt")
    source = adapter_source(plan(inspect(str(ckpt))))
    assert "LayerNorm(dim, 1e-05" in source and "offset=2" in source
    hf = BioGptLearnedPositionalEmbedding(10, 4)
    ours = LearnedPositions(10, 4, offset=2)
    with torch.no_grad():
        hf.weight.copy_(torch.randn(12, 4))
        ours.weight.copy_(hf.weight)
        positions = torch.arange(7)[None]
        assert torch.equal(ours(positions), hf(torch.ones(1, 7, dtype=torch.long)))


# --- A.X-K1: the MoE block's output norm ---------------------------------------------------------------------------


def _store_dense_post_mlp_norm(ckpt: Path) -> None:
    """As the released A.X-K1 checkpoints: a post_mlp_layernorm stored for the dense layer 0 as well."""
    from safetensors.torch import load_file, save_file

    tensors = load_file(ckpt / "model.safetensors")
    tensors["model.layers.0.post_mlp_layernorm.weight"] = tensors["model.layers.1.post_mlp_layernorm.weight"] * 3
    save_file(tensors, ckpt / "model.safetensors", metadata={"format": "pt"})


def test_axk1_post_mlp_norm_is_the_moe_blocks_output_norm(tiny, tmp_path: Path) -> None:
    """A norm after the feed-forward block on exactly the MoE layers is the MoE block's output norm: composed from
    the tensors alone (no family fact needed), parity passing; a dense layer's stored copy (the released layout),
    which A.X-K1's code never applies, is dropped by the family fact, and parity still passes."""
    ckpt = copy_tiny(tiny, "axk1", tmp_path)
    with without_family_fact("axk1"):
        the_plan = plan(inspect(str(ckpt)))
        assert not the_plan.stubs and not the_plan.overrides
        source = adapter_source(the_plan)
        assert "output_norm_eps=" in source and "mlp.output_norm.weight" in source
        _store_dense_post_mlp_norm(ckpt)
        stubs = {s.op: s.reason for s in plan(inspect(str(ckpt))).stubs}
        assert "post_mlp" in stubs["norm_layout"]  # on a dense layer too: the tensors cannot tell whether it runs
    result = generate(ckpt, tmp_path / "out", parity=True)
    assert result.parity["passed"], result.parity["detail"]
    assert result.overrides == ("moe_output_norm=True",)


# --- a bias only some layers store -------------------------------------------------------------------------------


def test_gpt_neox_japanese_last_layer_output_bias_is_zero_elsewhere(tiny, tmp_path: Path) -> None:
    """GPT-NeoX-Japanese stores `attention.dense_bias` for its last layer only: the composed adapter loads it there
    and zeros (no bias) in the other layers, and parity passes; an MLP sized hidden x intermediate_multiple_size."""
    from safetensors.torch import load_file

    ckpt = copy_tiny(tiny, "gpt_neox_japanese", tmp_path)
    config = json.loads((ckpt / "config.json").read_text())
    last = config["num_hidden_layers"] - 1
    result = generate(ckpt, tmp_path / "out", parity=True)
    assert result.parity["passed"], result.parity["detail"]
    source = (tmp_path / "out/adapters/gpt_neox_japanese.py").read_text()
    assert "zeros_if_absent" in source and "intermediate_multiple_size" in source
    assert (
        f"biases some layers lack, zero there: gpt_neox_japanese.layers.{{}}.attention.dense_bias (1 of {last + 1}"
        in source
    )
    adapter = load_adapter(tmp_path / "out/adapters/gpt_neox_japanese.py").Model.from_pretrained(ckpt)
    stored = load_file(ckpt / "model.safetensors")[f"gpt_neox_japanese.layers.{last}.attention.dense_bias"]
    biases = [layer.self_attn.o_proj.bias for layer in adapter.model.layers]
    assert float(stored.abs().max()) > 0 and torch.equal(biases[last], stored.to(biases[last].dtype))
    assert all(not b.any() for b in biases[:last])


def test_a_weight_some_layers_lack_is_still_unloaded(tiny, tmp_path: Path) -> None:
    """Only a bias may be absent (zero is no bias): a layer without its o_proj weight stays a load error."""
    from safetensors.torch import load_file, save_file

    from onboard.generate_adapter.loader import WeightsError

    ckpt = copy_tiny(tiny, "llama", tmp_path)
    tensors = load_file(ckpt / "model.safetensors")
    del tensors["model.layers.0.self_attn.o_proj.weight"]
    save_file(tensors, ckpt / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(WeightsError, match=r"unloaded parameters: model\.layers\.0\.self_attn\.o_proj\.weight"):
        load_adapter(ADAPTERS_DIR / "llama.py").Model.from_pretrained(ckpt)


# --- DeepSeek Sparse Attention -------------------------------------------------------------------------------------


@pytest.mark.parametrize("model_type", ["deepseek_v32", "glm_moe_dsa"])
def test_sparse_attention_composes_with_its_indexer(tiny, tmp_path: Path, model_type: str) -> None:
    """DeepSeek-V3.2 / GLM-MoE-DSA: MLA with the top-k indexer (index_topk 4 in the tiny config, so prompts of 5
    tokens and more are cut) composes and passes parity. Inspect keeps their norms RMSNorms: the indexer's
    LayerNorm'd key (k_norm, with a bias) is attention, not a layer norm."""
    ckpt = copy_tiny(tiny, model_type, tmp_path)
    assert json.loads((ckpt / "config.json").read_text())["index_topk"] == 4
    assert inspect(str(ckpt)).norms.kind == "rms"
    result = generate(ckpt, tmp_path / "out", parity=True)
    assert result.parity["passed"], result.parity["detail"]
    source = (tmp_path / f"out/adapters/{model_type}.py").read_text()
    assert "indexer=IndexerSpec(args.index_n_heads, args.index_head_dim, args.index_topk" in source
    assert ("args.index_topk, rope_interleaved=True)" in source) == (model_type == "glm_moe_dsa")


def test_glm_dsa_layers_sharing_a_previous_selection_are_refused(tiny, tmp_path: Path) -> None:
    """GLM-MoE-DSA's indexer_types "shared" (a layer reusing the previous layer's top-k) is not composed: the
    adapter refuses such a config by name when it loads."""
    from onboard.errors import ConfigError

    ckpt = copy_tiny(tiny, "glm_moe_dsa", tmp_path)
    generate(ckpt, tmp_path / "out")
    adapter = load_adapter(tmp_path / "out/adapters/glm_moe_dsa.py")
    edit_config(ckpt, indexer_types=["full", "shared", "full"])
    with pytest.raises(ConfigError, match="previous layer's top-k"):
        adapter.Model.from_pretrained(ckpt)


def test_mimo_v2_flash_asymmetric_heads_compose_from_the_shapes(tiny, tmp_path: Path) -> None:
    """MiMo-V2-Flash: values narrower than queries and keys (v_head_dim 8 vs 16), its sliding layers with twice the
    KV heads (read from each layer's k/v widths) and the only ones with sinks, values scaled by
    attention_value_scale: composed without a family fact, parity passing."""
    ckpt = copy_tiny(tiny, "mimo_v2_flash", tmp_path)
    result = generate(ckpt, tmp_path / "out", parity=True)
    assert result.parity["passed"], result.parity["detail"]
    assert result.overrides == ()
    source = " ".join((tmp_path / "out/adapters/mimo_v2_flash.py").read_text().split())
    for part in (
        "args.num_key_value_heads * 2 if layer_type == SLIDING else args.num_key_value_heads",
        "sinks=layer_type == SLIDING",
        "v_head_dim=args.v_head_dim",
        "v_scale=args.attention_value_scale",
    ):
        assert part in source, part


def test_diffllama_differential_attention_composes(tiny, tmp_path: Path) -> None:
    """DiffLlama's lambda parameters compose differential attention, its lambda_init of each layer's index:
    parity passes; the same adapter with every layer's lambda_init taken at layer 0 fails it."""
    ckpt = copy_tiny(tiny, "diffllama", tmp_path)
    result = generate(ckpt, tmp_path / "out", parity=True)
    assert result.parity["passed"], result.parity["detail"]
    adapter = tmp_path / "out/adapters/diffllama.py"
    source = adapter.read_text()
    assert "differential=True, layer_index=i," in " ".join(source.split())
    adapter.write_text(source.replace("layer_index=i,", "layer_index=0,"))
    assert not check_parity(adapter, ckpt)["passed"]


def test_phimoe_sparsemixer_routing_is_a_family_fact(tiny, tmp_path: Path) -> None:
    """PhiMoE's router tensor is a plain gate: only its code shows the sparsemixer top-2 routing. With the family
    fact the composed adapter passes parity and refuses another top-k at load; composed
    as a plain softmax top-2 MoE (the fact removed), parity fails: the routing is what the fact carries."""
    from onboard.errors import ConfigError

    ckpt = copy_tiny(tiny, "phimoe", tmp_path)
    adapter = composed_adapter(ckpt, tmp_path / "fact")
    assert "SparseMixerMoE(" in adapter.read_text()
    assert check_parity(adapter, ckpt)["passed"]
    with without_family_fact("phimoe"):
        plain = composed_adapter(ckpt, tmp_path / "plain")
    assert "SparseMixerMoE(" not in plain.read_text()
    assert not check_parity(plain, ckpt)["passed"]
    edit_config(ckpt, num_experts_per_tok=3)
    with pytest.raises(ConfigError, match="top-2 only"):
        load_adapter(adapter).Model.from_pretrained(ckpt)


def test_gpt_oss_experts_compose_with_the_family_fact_only(tiny, tmp_path: Path) -> None:
    """gpt-oss: the family fact names its experts' layout (gate and up in alternating
    columns) and clamped SwiGLU, which the tensors cannot show; parity passes. Without the fact, the expert and
    router biases are named as what the MoE block lacks, never guessed."""
    ckpt = copy_tiny(tiny, "gpt_oss", tmp_path)
    adapter = composed_adapter(ckpt, tmp_path / "fact")
    assert "GptOssMoE(" in adapter.read_text()
    assert check_parity(adapter, ckpt)["passed"]
    with without_family_fact("gpt_oss"):
        stubs = {s.op: s.reason for s in plan(inspect(str(ckpt))).stubs}
    assert "experts.gate_up_proj_bias" in stubs["moe_biases"] and "router.bias" in stubs["moe_biases"]


@pytest.mark.parametrize("model_type", ["lfm2", "lfm2_moe", "lfm3"])
def test_lfm_short_convolution_layers_compose(tiny, tmp_path: Path, model_type: str) -> None:
    """LFM2 / LFM2-MoE / LFM3: gated short convolutions on the `conv` layers, attention on the others (LFM3: a
    sigmoid gate per head, sandwich norms); SwiGLU and the norm named embedding_norm applied after the last layer
    are family facts (the code fixes both). Parity passes; without the facts the composer names both instead of
    guessing."""
    ckpt = copy_tiny(tiny, model_type, tmp_path)
    result = generate(ckpt, tmp_path / "out", parity=True)
    assert result.parity["passed"], result.parity["detail"]
    source = " ".join((tmp_path / f"out/adapters/{model_type}.py").read_text().split())
    assert 'ShortConv(args.hidden_size, args.conv_L_cache, bias=args.conv_bias) if layer_type == "conv" else' in source
    with without_family_fact(model_type):
        stubs = {s.op for s in plan(inspect(str(ckpt))).stubs}
    assert {"embedding_norm", "activation_none"} <= stubs


@pytest.mark.parametrize("model_type", ["qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"])
def test_gated_deltanet_layers_compose(tiny, tmp_path: Path, model_type: str) -> None:
    """Qwen3-Next (q, k, v, z and b, a grouped per key head in in_proj_qkvz / in_proj_ba, read through the
    grouped_rows op) and Qwen3.5 (separate projections): Gated DeltaNet on the linear_attention layers, gated
    attention on the others, composed without a family fact; parity passes. Inspect gives Qwen3.5's text models
    their (1 + w) RMSNorms, as Qwen3-Next's."""
    ckpt = copy_tiny(tiny, model_type, tmp_path)
    assert inspect(str(ckpt)).norms.offset == 1.0
    result = generate(ckpt, tmp_path / "out", parity=True)
    assert result.parity["passed"], result.parity["detail"]
    assert result.overrides == ()
    source = " ".join((tmp_path / f"out/adapters/{model_type}.py").read_text().split())
    assert 'if layer_type == "linear_attention" else Attention(' in source
    assert ("grouped_rows" in source) == (model_type == "qwen3_next")


@pytest.mark.parametrize("model_type", ["bamba", "granitemoehybrid"])
def test_mamba2_hybrid_layers_compose(tiny, tmp_path: Path, model_type: str) -> None:
    """Bamba and Granite-4.0 (granitemoehybrid): Mamba-2 on the linear_attention layers, attention on the others,
    composed without a family fact; parity passes. Granite-4.0 takes no positional encoding (position_embedding_type
    null): none is composed, and a config asking for rotary is refused by name, not ignored."""
    from onboard.errors import ConfigError

    ckpt = copy_tiny(tiny, model_type, tmp_path)
    result = generate(ckpt, tmp_path / "out", parity=True)
    assert result.parity["passed"], result.parity["detail"]
    assert result.overrides == ()
    adapter = tmp_path / f"out/adapters/{model_type}.py"
    source = " ".join(adapter.read_text().split())
    assert 'time_step_limit=args.time_step_limit, ) if layer_type == "linear_attention" else Attention(' in source
    args = load_adapter(adapter).ModelArgs
    config = json.loads((ckpt / "config.json").read_text())
    if model_type == "granitemoehybrid":
        assert "no_positions" in inspect(str(ckpt)).features and "no positional encoding" in source
        with pytest.raises(ConfigError, match="position_embedding_type='rope'"):
            args.from_dict({**config, "position_embedding_type": "rope"})


def test_mamba2_layer_types_of_a_day_zero_config(tiny, tmp_path: Path) -> None:
    """The composed adapter's own reading of which layers are Mamba, as for a model_type transformers does not
    know (config.json as written): Bamba's attn_layer_indices, and Granite-4.0's older layer_types names."""
    for model_type in ("bamba", "granitemoehybrid"):
        adapter = composed_adapter(copy_tiny(tiny, model_type, tmp_path), tmp_path / "out")
        args = load_adapter(adapter).ModelArgs
        config = {
            **json.loads((tiny(model_type) / "config.json").read_text()),
            "model_type": "day-zero-hybrid",
            "num_hidden_layers": 5,
        }
        config.pop("layer_types", None)
        if model_type == "bamba":
            config["attn_layer_indices"] = [1, 4]
        else:
            config["layer_types"] = ["mamba", "attention", "mamba", "mamba", "attention"]
        assert args.from_dict(config).layer_types == [
            "linear_attention",
            "full_attention",
            "linear_attention",
            "linear_attention",
            "full_attention",
        ]


def test_mamba2_single_block_layers_with_a_float32_residual(tiny, tmp_path: Path) -> None:
    """Mamba-2 (mamba2): one block per layer (norm, then the mixer), no feed-forward and no positions; parity passes
    in float32 and bfloat16. Its residual_in_fp32 keeps the residual stream in float32 between layers, as
    transformers does: in a bfloat16 adapter each layer's output is float32, and with the flag off bfloat16."""
    ckpt = copy_tiny(tiny, "mamba2", tmp_path)
    result = generate(ckpt, tmp_path / "out", parity=True)
    assert result.parity["passed"], result.parity["detail"]
    adapter = tmp_path / "out/adapters/mamba2.py"
    source = adapter.read_text()
    assert "Single-block layer" in source and "self.mlp = None" in source
    assert json.loads((ckpt / "config.json").read_text())["residual_in_fp32"] is True
    report = check_parity(adapter, ckpt, "bfloat16")
    assert report["passed"] and report["reference_worst"] is not None, report["detail"]
    model_class = load_adapter(adapter).Model
    ids = torch.tensor([[3, 17, 42, 5]])
    for flag, stream in ((True, torch.float32), (False, torch.bfloat16)):
        edit_config(ckpt, residual_in_fp32=flag)
        model = model_class.from_pretrained(ckpt, dtype=torch.bfloat16)
        with torch.no_grad():
            logits, hidden = model(ids, return_hidden_states=True)
        assert [h.dtype for h in hidden[1:]] == [stream] * len(model.model.layers) and logits.isfinite().all()


def test_nemotron_h_one_block_per_layer_composes(tiny, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nemotron-H: each layer is a norm and one block by its layer type (Mamba-2, attention without positions, a
    plain relu2 MLP, or an MoE of plain experts with a plain shared expert); num_hidden_layers comes from the
    layer types (config.json has none). Parity passes in float32 and bfloat16 with no family fact. That its attention
    takes no positions is inspect's knowledge of the family: without it the composer names the gap, never guesses."""
    from onboard.inspect_checkpoint import numerics

    ckpt = copy_tiny(tiny, "nemotron_h", tmp_path)
    assert "num_hidden_layers" not in json.loads((ckpt / "config.json").read_text())
    result = generate(ckpt, tmp_path / "out", parity=True)
    assert result.parity["passed"], result.parity["detail"]
    assert result.overrides == ()
    adapter = tmp_path / "out/adapters/nemotron_h.py"
    source = " ".join(adapter.read_text().split())
    assert 'self.self_attn = ( None if layer_type in ("mlp", "moe") else Mamba2Mixer(' in source
    assert 'gated=False, ) if layer_type == "moe" else MLP(' in source and "self.rope_kind = None" in source
    bf16 = check_parity(adapter, ckpt, "bfloat16")
    assert within_tolerance(bf16) and bf16["reference_worst"] is not None, bf16["detail"]
    monkeypatch.setattr(numerics, "NOPE_TYPES", set())
    stubs = {s.op for s in plan(inspect(str(ckpt))).stubs}
    assert stubs == {"positions"}


def test_beam_gate_bias_and_position_scaled_queries(tiny, tmp_path: Path) -> None:
    """Beam: a bias per head on gate_proj's elementwise output gate, and on its layers without rotary queries scaled by
    (1 + (position + 1) / 2048) ** 0.1, constants of its code (family fact). Parity passes, also with the gate biases
    made large (so they are read); without the fact it fails."""
    from safetensors.torch import load_file, save_file

    ckpt = copy_tiny(tiny, "beam", tmp_path)
    shard = next(ckpt.glob("*.safetensors"))
    tensors = load_file(shard)
    for name in [n for n in tensors if n.endswith("self_attn.gate_bias")]:
        tensors[name] = torch.linspace(-2.0, 2.0, tensors[name].numel())
    save_file(tensors, shard, metadata={"format": "pt"})
    result = generate(ckpt, tmp_path / "out", parity=True)
    assert result.parity["passed"], result.parity["detail"]
    assert result.overrides == ("nope_query_scale=(2048.0, 0.1)",)
    assert "gate_proj=True, gate_bias=True" in " ".join((tmp_path / "out/adapters/beam.py").read_text().split())
    with without_family_fact("beam"):
        adapter = composed_adapter(ckpt, tmp_path / "no-fact")
    assert not check_parity(adapter, ckpt)["passed"]


@pytest.mark.parametrize("model_type", ["mamba", "falcon_mamba", "jamba"])
def test_mamba1_layers_compose(tiny, tmp_path: Path, model_type: str) -> None:
    """Mamba-1 (x_proj / dt_proj): Mamba and Falcon-Mamba as single-block layers (Falcon-Mamba's weightless RMS norms
    on dt, B and C read from its mixer_rms_eps), Jamba's Mamba layers beside attention without positions and MoE
    layers one per period (its weighted dt / B / C norms from the tensors). Parity passes; Jamba's unnormalised
    top-k weights are a family fact, and without it parity fails."""
    ckpt = copy_tiny(tiny, model_type, tmp_path)
    result = generate(ckpt, tmp_path / "out", parity=True)
    assert result.parity["passed"], result.parity["detail"]
    source = " ".join((tmp_path / f"out/adapters/{model_type}.py").read_text().split())
    assert "MambaMixer( args.hidden_size, args.mamba_expand * args.hidden_size," in source
    norms = {
        "mamba": "activation=args.mamba_hidden_act, )",
        "falcon_mamba": 'bc_norm="weightless"',
        "jamba": 'bc_norm="weighted"',
    }
    assert norms[model_type] in source
    assert result.overrides == (("norm_topk_prob=False",) if model_type == "jamba" else ())
    if model_type == "jamba":
        assert "return i % self.expert_layer_period == self.expert_layer_offset" in source
        with without_family_fact("jamba"):
            adapter = composed_adapter(ckpt, tmp_path / "no-fact")
        assert not check_parity(adapter, ckpt)["passed"]


@pytest.mark.parametrize(
    "model_type", ["lfm2", "qwen3_next", "deepseek_v32", "mimo_v2_flash", "bamba", "mamba", "jamba"]
)
def test_new_mixers_pass_parity_in_bfloat16(tiny, tmp_path: Path, model_type: str) -> None:
    """The dtype engines serve: the short convolution, Gated DeltaNet and Mamba-2 (their recurrences in float32 as
    transformers'), the DSA indexer and asymmetric heads, composed, agree with transformers in bfloat16 within the noise of
    transformers' own bfloat16 runs (the comparator's calibrated verdict)."""
    ckpt = copy_tiny(tiny, model_type, tmp_path)
    report = check_parity(composed_adapter(ckpt, tmp_path / "out"), ckpt, "bfloat16")
    assert within_tolerance(report), report["detail"]
    assert report["reference_worst"] is not None  # judged against transformers' own bfloat16 run


def test_bloom_alibi_and_embedding_norm_compose(tiny, tmp_path: Path) -> None:
    """BLOOM: ALiBi instead of positions, a LayerNorm on the embeddings, query_key_value grouped per head and its
    tanh GELU (family facts: the code fixes both) compose, parity passing; slow_but_exact (output projections summed
    in pretraining_tp slices) is refused at load rather than run unmodelled."""
    from onboard.errors import ConfigError

    ckpt = copy_tiny(tiny, "bloom", tmp_path)
    result = generate(ckpt, tmp_path / "out", parity=True)
    assert result.parity["passed"], result.parity["detail"]
    source = " ".join((tmp_path / "out/adapters/bloom.py").read_text().split())
    assert "alibi=True" in source and "model.embed_norm.weight" in source
    edit_config(ckpt, slow_but_exact=True, pretraining_tp=2)
    with pytest.raises(ConfigError, match="slow_but_exact"):
        load_adapter(tmp_path / "out/adapters/bloom.py").Model.from_pretrained(ckpt)


def test_codegen_qkv_blocks_are_reordered_at_load(tiny, tmp_path: Path) -> None:
    """CodeGen's qkv_proj rows come in 4 blocks (its mp_num) of [q, v, k]: the codegen_qkv op reorders them to
    [all q; all k; all v] (rows checked on a labelled tensor), and the composed adapter passes parity; read as a
    plain [q; k; v] it fails."""
    heads, head_dim = 8, 2
    labels = torch.arange(3 * heads * head_dim).float()[:, None]  # row r holds r
    reordered = _combine("codegen_qkv", [labels])[:, 0].long()
    local = heads * head_dim // 4  # rows of one part within a block
    for part, offset in (("q", 0), ("k", 2 * local), ("v", local)):
        start = {"q": 0, "k": 1, "v": 2}[part] * heads * head_dim
        expected = [m * 3 * local + offset + i for m in range(4) for i in range(local)]
        assert reordered[start : start + heads * head_dim].tolist() == expected, part
    ckpt = copy_tiny(tiny, "codegen", tmp_path)
    adapter = composed_adapter(ckpt, tmp_path / "out")
    assert check_parity(adapter, ckpt)["passed"]
    plain = re.sub(r',\s*"codegen_qkv"', "", adapter.read_text())
    assert plain != adapter.read_text()
    adapter.write_text(plain)
    assert not check_parity(adapter, ckpt)["passed"]


def test_xglm_sinusoidal_positions_compose(tiny, tmp_path: Path) -> None:
    """XGLM: fixed sinusoidal positions at row p + 2, computed (never stored), a family fact. The block equals
    transformers' table; the adapter passes parity in bfloat16. Its float32 check stays unverified: transformers' own
    XGLM attention overflows in float64 (torch.finfo(float64).min into a float32 scalar), so the calibration run
    that float32 parity is judged by cannot run, and the verdict says so instead of passing."""
    from transformers.models.xglm.modeling_xglm import XGLMSinusoidalPositionalEmbedding

    from onboard.generate_adapter.composed_blocks import SinusoidalPositions

    table = XGLMSinusoidalPositionalEmbedding.get_embedding(40, 63, padding_idx=1)
    rows = SinusoidalPositions(63, offset=2, padding_idx=1)(torch.arange(-2, 38)[None])[0]
    assert torch.allclose(rows, table, atol=1e-6) and not rows[1].any()
    ckpt = copy_tiny(tiny, "xglm", tmp_path)
    adapter = composed_adapter(ckpt, tmp_path / "out")
    assert "SinusoidalPositions(args.hidden_size, offset=2, padding_idx=args.pad_token_id)" in adapter.read_text()
    assert within_tolerance(check_parity(adapter, ckpt, "bfloat16"))
    result = check_parity(adapter, ckpt, "float32")
    assert result["status"] == "unverified" and "float64" in result["detail"], result["detail"]
    broken = tmp_path / "broken" / "adapters" / "xglm.py"
    broken.parent.mkdir(parents=True)
    broken.write_text(adapter.read_text().replace("offset=2, padding_idx", "offset=0, padding_idx"))
    assert not check_parity(broken, ckpt, "bfloat16")["passed"]  # positions off by two rows: caught
    with without_family_fact("xglm"):
        stubbed = plan(inspect(str(ckpt)))
    assert [s.op for s in stubbed.stubs] == ["absolute_positions"]
