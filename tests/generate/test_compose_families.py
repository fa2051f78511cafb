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
from tests.generate.conftest import composed_adapter, copy_tiny, edit_config, without_family_fact


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
    source = adapter_source(plan(inspect(str(ckpt)), compose_only=True))
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
        the_plan = plan(inspect(str(ckpt)), compose_only=True)
        assert not the_plan.stubs and not the_plan.overrides
        source = adapter_source(the_plan)
        assert "output_norm_eps=" in source and "mlp.output_norm.weight" in source
        _store_dense_post_mlp_norm(ckpt)
        stubs = {s.op: s.reason for s in plan(inspect(str(ckpt)), compose_only=True).stubs}
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
    assert f"biases some layers lack, zero there: gpt_neox_japanese.layers.{{}}.attention.dense_bias (1 of {last + 1}" \
        in source
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
    for part in ("args.num_key_value_heads * 2 if layer_type == SLIDING else args.num_key_value_heads",
                 "sinks=layer_type == SLIDING", "v_head_dim=args.v_head_dim", "v_scale=args.attention_value_scale"):
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
    fact the adapter composed without PhiMoE's ArchSpec passes parity and refuses another top-k at load; composed
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
    """gpt-oss without its ArchSpec: the family fact names its experts' layout (gate and up in alternating
    columns) and clamped SwiGLU, which the tensors cannot show; parity passes. Without the fact, the expert and
    router biases are named as what the MoE block lacks, never guessed."""
    ckpt = copy_tiny(tiny, "gpt_oss", tmp_path)
    adapter = composed_adapter(ckpt, tmp_path / "fact")
    assert "GptOssMoE(" in adapter.read_text()
    assert check_parity(adapter, ckpt)["passed"]
    with without_family_fact("gpt_oss"):
        stubs = {s.op: s.reason for s in plan(inspect(str(ckpt)), compose_only=True).stubs}
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
        stubs = {s.op for s in plan(inspect(str(ckpt)), compose_only=True).stubs}
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
        config = {**json.loads((tiny(model_type) / "config.json").read_text()), "model_type": "day-zero-hybrid",
                  "num_hidden_layers": 5}  # fmt: skip
        config.pop("layer_types", None)
        if model_type == "bamba":
            config["attn_layer_indices"] = [1, 4]
        else:
            config["layer_types"] = ["mamba", "attention", "mamba", "mamba", "attention"]
        assert args.from_dict(config).layer_types == ["linear_attention", "full_attention", "linear_attention",
                                                      "linear_attention", "full_attention"]  # fmt: skip


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
    assert "gated=False, ) if layer_type == \"moe\" else MLP(" in source and "self.rope_kind = None" in source
    bf16 = check_parity(adapter, ckpt, "bfloat16")
    assert bf16["passed"] and bf16["reference_worst"] is not None, bf16["detail"]
    monkeypatch.setattr(numerics, "NOPE_TYPES", set())
    stubs = {s.op for s in plan(inspect(str(ckpt)), compose_only=True).stubs}
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
    norms = {"mamba": "activation=args.mamba_hidden_act, )", "falcon_mamba": 'bc_norm="weightless"',
             "jamba": 'bc_norm="weighted"'}  # fmt: skip
    assert norms[model_type] in source
    assert result.overrides == (("norm_topk_prob=False",) if model_type == "jamba" else ())
    if model_type == "jamba":
        assert "return i % self.expert_layer_period == self.expert_layer_offset" in source
        with without_family_fact("jamba"):
            adapter = composed_adapter(ckpt, tmp_path / "no-fact")
        assert not check_parity(adapter, ckpt)["passed"]


@pytest.mark.parametrize("model_type", ["lfm2", "qwen3_next", "deepseek_v32", "mimo_v2_flash", "bamba", "mamba", "jamba"])
def test_new_mixers_pass_parity_in_bfloat16(tiny, tmp_path: Path, model_type: str) -> None:
    """The dtype engines serve: the short convolution, Gated DeltaNet and Mamba-2 (their recurrences in float32 as
    transformers'), the DSA indexer and asymmetric heads, composed, agree with transformers in bfloat16 within the noise of
    transformers' own bfloat16 runs (the comparator's calibrated verdict)."""
    ckpt = copy_tiny(tiny, model_type, tmp_path)
    report = check_parity(composed_adapter(ckpt, tmp_path / "out"), ckpt, "bfloat16")
    assert report["passed"], report["detail"]
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
        "nope_temperature=(args.floor_scale, args.attn_scale) if args.attn_temperature_tuning else None":
            "nope_temperature=None",
        "qk_norm=(QKNormSpec(args.rms_norm_eps, weight=False) if args.use_qk_norm and self.rope_kind is not None "
        "else None)": "qk_norm=None",
        "weights_on_input=True": "weights_on_input=False",
        "rope_interleaved=True": "rope_interleaved=False",
    }  # fmt: skip
    _each_taken_out_fails_parity(ckpt, source, taken_out, tmp_path)
    _fails_without_family_facts(ckpt, "llama4_text", tmp_path)


def _fails_without_family_facts(ckpt: Path, model_type: str, tmp_path: Path) -> None:
    """Without the family's facts, composition refuses by name (a stub) or its adapter fails parity."""
    with without_family_fact(model_type):
        if plan(inspect(str(ckpt)), compose_only=True).stubs:
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
    assert check_parity(adapter, ckpt, "bfloat16")["passed"]
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
    assert check_parity(adapter, ckpt, "bfloat16")["passed"]
    result = check_parity(adapter, ckpt, "float32")
    assert result["status"] == "unverified" and "float64" in result["detail"], result["detail"]
    broken = tmp_path / "broken" / "adapters" / "xglm.py"
    broken.parent.mkdir(parents=True)
    broken.write_text(adapter.read_text().replace("offset=2, padding_idx", "offset=0, padding_idx"))
    assert not check_parity(broken, ckpt, "bfloat16")["passed"]  # positions off by two rows: caught
    with without_family_fact("xglm"):
        stubbed = plan(inspect(str(ckpt)), compose_only=True)
    assert [s.op for s in stubbed.stubs] == ["absolute_positions"]


# Mechanisms of a composed family, each as the adapter reads it (whitespace collapsed) and what replaces it to take it
# out: parity passes in float32 and bfloat16, and the adapter with any one of them taken out fails it (those the
# tensors' shapes enforce fail at load, which parity reports as a failure too); with family facts, composing without
# them fails too.
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
    # ModernBERT-decoder: a LayerNorm on the embeddings, none before layer 0's attention, fused [act; gate] MLP rows
    # (Wi), and a prediction head norm(act(dense(x))) before the tied projection with its own bias.
    "modernbert-decoder": {
        "HeadTransform(args.hidden_size, args.classifier_activation,": 'HeadTransform(args.hidden_size, "relu",',
        "norm(args, args.hidden_size) if i else nn.Identity()": "norm(args, args.hidden_size)",
    },
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
        assert check_parity(adapter, ckpt, dtype)["passed"], dtype
    taken_out = {
        "self.mlp(self.pre_feedforward_layernorm(x), x)":
            "self.mlp(self.pre_feedforward_layernorm(x), self.pre_feedforward_layernorm(x))",
        "args.top_k_experts": "1",
    }  # fmt: skip
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
    for shared, source in ((2, 0), (3, 1)):  # each stores a copy-shaped k_proj (and v_proj, k_norm where its source does)
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
        assert check_parity(adapter, ckpt, dtype)["passed"], dtype
