"""Adapters composed from the profile alone: config values resolved as transformers resolves them (one alias
table), weight maps inferred from tensor names and shapes (ambiguity is an error naming the tensors), day-zero model
types composed without a hand-written ArchSpec, inspect's structured novelty handed over in full."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import msgspec
import pytest
import torch

from onboard.generate_adapter import generate
from onboard.generate_adapter.adapter_source import adapter_source
from onboard.generate_adapter.compose_rules import compress, pattern_expr
from onboard.generate_adapter.config_values import read_config
from onboard.generate_adapter.loader import _combine, deinterleave_heads
from onboard.generate_adapter.parity import check_parity, compare, load_adapter, reference_model
from onboard.generate_adapter.plan import plan
from onboard.generate_adapter.regenerate import ADAPTERS_DIR
from onboard.generate_adapter.runtime import NotRunnable
from onboard.generate_adapter.weight_inference import AmbiguousWeights
from onboard.generate_adapter.weight_patterns import classify
from onboard.inspect_checkpoint import inspect
from onboard.profile import TensorGroupStat


def _config(ckpt: Path, **changes: object) -> dict:
    path = ckpt / "config.json"
    config = json.loads(path.read_text())
    config.update(changes)
    path.write_text(json.dumps(config))
    return config


def _copy(tiny, model_type: str, tmp_path: Path, name: str | None = None) -> Path:
    ckpt = tmp_path / (name or model_type)
    shutil.copytree(tiny(model_type), ckpt)
    return ckpt


# --- config values ---------------------------------------------------------------------------------------------


def test_rope_scaling_over_rope_parameters_is_read_as_transformers_reads_it(tiny, tmp_path: Path) -> None:
    """A legacy rope_scaling {linear, x4} next to rope_parameters {default}: transformers 5 applies linear x4;
    so does the adapter (it used the default rope before config values went through transformers' class)."""
    ckpt = _copy(tiny, "llama", tmp_path)
    _config(ckpt, rope_scaling={"rope_type": "linear", "factor": 4.0})
    adapter = load_adapter(ADAPTERS_DIR / "llama.py").Model.from_pretrained(ckpt)
    assert adapter.rotary["full_attention"].cfg.rope_type == "linear"
    assert adapter.rotary["full_attention"].cfg.factor == 4.0
    reference = reference_model(ckpt, torch.float32)
    assert reference.config.rope_parameters["rope_type"] == "linear"
    report = check_parity(ADAPTERS_DIR / "llama.py", ckpt, reference=reference)
    assert report["passed"], report["detail"]
    # The default rope (what a raw read of rope_parameters gives) is far off: the check can fail.
    raw_rope = adapter.rotary["full_attention"]
    default = type(raw_rope)(replace(raw_rope.cfg, rope_type="default", factor=None))
    adapter.rotary["full_attention"] = default
    ids = [torch.randint(0, 1000, (1, 40), generator=torch.Generator().manual_seed(0))]
    assert compare(adapter, reference, ids)[0].relative > 1e-3


def test_one_alias_table_and_derived_values() -> None:
    gpt2 = read_config({"model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": 2, "vocab_size": 10})
    assert (gpt2.get("hidden_size"), gpt2.get("num_attention_heads"), gpt2.get("num_hidden_layers")) == (64, 4, 2)
    assert gpt2.get("rms_norm_eps") == 1e-5  # layer_norm_epsilon, GPT2Config's default
    assert gpt2.source.startswith("transformers")
    # A model_type transformers does not know: config.json as written, through the same aliases.
    raw = read_config({"model_type": "dayzero_x", "n_embd": 32, "num_kv_heads": 2, "layer_norm_eps": 1e-5})
    assert (raw.get("hidden_size"), raw.get("num_key_value_heads"), raw.get("rms_norm_eps")) == (32, 2, 1e-5)
    assert raw.source == "config.json"


def test_derived_rules_falcon_multi_query_and_gptj_rotary_dim(tiny) -> None:
    from onboard.generate_adapter.config_values import field_values

    fields = dataclasses.fields(load_adapter(ADAPTERS_DIR / "llama.py").ModelArgs)
    falcon = json.loads((tiny("falcon") / "config.json").read_text())
    kwargs, _ = field_values(fields, falcon, {})
    assert kwargs["num_key_value_heads"] == 1, "multi_query without new_decoder_architecture is one KV head"
    gptj = json.loads((tiny("gptj") / "config.json").read_text())
    kwargs, _ = field_values(fields, gptj, {})
    assert kwargs["partial_rotary_factor"] == 8 / 16


# --- the pattern library -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "role"),
    [
        ("model.layers.{}.self_attn.q_proj.weight", "attn.q"),
        ("layers.{}.attention.wq.weight", "attn.q"),
        ("model.layers.{}.self_attn.qkv_proj.weight", "attn.qkv"),
        ("transformer.h.{}.attn.c_attn.weight", "attn.qkv"),
        ("gpt_neox.layers.{}.attention.query_key_value.weight", "attn.qkv_grouped"),
        ("transformer.blocks.{}.norm_attn_norm.attn.Wqkv.weight", "attn.qkv"),
        ("layers.{}.attention.wqkv.weight", "attn.qkv"),  # Ergo's serving export
        ("layers.{}.attention.wo.weight", "attn.o"),
        ("layers.{}.feed_forward.up.weight", "mlp.up"),
        ("layers.{}.feed_forward.down.weight", "mlp.down"),
        ("layers.{}.post_attention_norm.weight", "norm.post_attn_out"),
        ("layers.{}.feed_forward.router_bias", "moe.router_bias"),
        ("transformer.h.{}.self_attention.dense.weight", "attn.o"),
        ("model.layers.{}.self_attn.query_layernorm.weight", "attn.q_norm"),
        ("model.layers.{}.self_attn.q_layernorm.norms.{}.weight", "attn.q_norm_heads"),
        ("model.layers.{}.mlp.gate_up_proj.weight", "mlp.gate_up"),
        ("layers.{}.feed_forward.w1.weight", "mlp.gate"),
        ("layers.{}.feed_forward.w3.weight", "mlp.up"),
        ("layers.{}.feed_forward.w2.weight", "mlp.down"),
        ("model.layers.{}.mlp.fc1.weight", "mlp.up"),
        ("transformer.h.{}.mlp.dense_h_to_4h.weight", "mlp.up"),
        ("model.layers.{}.mlp.experts.{}.gate_proj.weight", "moe.expert.gate"),
        ("model.layers.{}.block_sparse_moe.experts.{}.w2.weight", "moe.expert.down"),
        ("model.layers.{}.feed_forward.experts.gate_up_proj", "moe.experts.gate_up"),
        ("model.layers.{}.mlp.shared_experts.up_proj.weight", "moe.shared.up"),
        ("model.layers.{}.mlp.gate.e_score_correction_bias", "moe.router_bias"),
        ("model.layers.{}.mlp.gate.moe_statics.e_score_correction_bias", "moe.router_bias"),  # ERNIE MoE, [1, E]
        ("model.layers.{}.self_attn.softmax_offset", "attn.sinks"),  # flint
        ("model.layers.{}.self_attn.attention_sink_bias", "attn.sinks"),  # mimo_v2_flash
        ("model.layers.{}.self_attn.attn_sub_norm.weight", "attn.sub_norm"),  # BitNet
        ("model.layers.{}.mlp.ffn_sub_norm.weight", "mlp.sub_norm"),
        ("model.layers.{}.self_attn.gate_proj.weight", "attn.gate"),  # AFMoE
        ("model.layers.{}.mlp.gate_proj.weight", "mlp.gate"),
        ("model.layers.{}.mlp.router.weight", "moe.router"),
        ("model.layers.{}.self_attn.kv_b_proj.weight", "mla"),
        ("model.layers.{}.pre_feedforward_layernorm.weight", "norm.pre_mlp"),
        ("transformer.h.{}.ln_1.bias", "norm.input"),
        ("transformer.ln_f.weight", "final_norm"),
        ("embed_out.weight", "head"),
        ("model.layers.{}.self_attn.temperature_gate.weight", None),
    ],
)
def test_pattern_library_roles(name: str, role: str | None) -> None:
    assert classify(name)[0] == role


def test_deinterleave_heads_reorders_grouped_rows() -> None:
    heads, kv, d = 4, 2, 3
    q = torch.arange(heads * d).reshape(heads, d).float()
    k, v = 100 + torch.arange(kv * d).reshape(kv, d).float(), 200 + torch.arange(kv * d).reshape(kv, d).float()
    grouped = torch.cat([torch.cat([q[2 * g : 2 * g + 2], k[g : g + 1], v[g : g + 1]]) for g in range(kv)])
    fused = deinterleave_heads(grouped.reshape(-1, 1), heads, kv, d).flatten()
    assert torch.equal(fused, torch.cat([q.flatten(), k.flatten(), v.flatten()]))


def test_squeeze_drops_leading_unit_dims_only() -> None:
    bias = torch.arange(4.0).reshape(1, 4)  # ERNIE MoE's moe_statics.e_score_correction_bias for the block's [E]
    assert torch.equal(_combine("squeeze", [bias]), torch.arange(4.0))
    assert _combine("squeeze", [torch.zeros(1, 1, 3)]).shape == (3,)
    assert _combine("squeeze", [torch.zeros(2, 3)]).shape == (2, 3)


def test_ambiguous_mappings_are_errors_naming_the_tensors(tiny) -> None:
    profile = inspect(str(tiny("llama")))
    extra = TensorGroupStat("model.layers.{}.self_attn.qkv_proj.weight", 2, (128, 64))
    both = msgspec.structs.replace(
        profile, model_type="dayzero_x", tensor_templates=profile.tensor_templates + (extra,)
    )
    with pytest.raises(AmbiguousWeights, match=r"q_proj.*qkv_proj|qkv_proj.*q_proj"):
        plan(both)
    square = TensorGroupStat("model.layers.{}.mlp.experts.gate_up_proj", 2, (4, 64, 64))
    moe = inspect(str(tiny("qwen3_moe")))
    experts = tuple(t for t in moe.tensor_templates if ".experts." not in t.template) + (
        square,
        TensorGroupStat("model.layers.{}.mlp.experts.down_proj", 2, (4, 64, 32)),
    )
    with pytest.raises(AmbiguousWeights, match=r"experts\.gate_up_proj \[4, 64, 64\]"):
        plan(msgspec.structs.replace(moe, model_type="dayzero_moe", tensor_templates=experts))
    neox = inspect(str(tiny("gpt_neox")))
    with pytest.raises(AmbiguousWeights, match="query_key_value"):
        plan(
            msgspec.structs.replace(
                neox, model_type="dayzero_neox", dims=msgspec.structs.replace(neox.dims, num_kv_heads=2)
            )
        )


def test_ambiguity_is_a_clean_cli_error(tiny, tmp_path: Path) -> None:
    import subprocess
    import sys

    ckpt = _copy(tiny, "gpt_neox", tmp_path, "dayzero_neox")
    _config(ckpt, model_type="dayzero_neox", num_key_value_heads=2)
    env = {"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-m", "onboard", "generate", str(ckpt), "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "Error:" in proc.stderr and "query_key_value" in proc.stderr and "Traceback" not in proc.stderr


# --- composition ---------------------------------------------------------------------------------------------------


def test_layer_patterns_continue_for_deeper_checkpoints() -> None:
    assert compress(["dense", "moe", "moe"]) == (1, 1)
    assert pattern_expr([False, True, True], repr) == "i >= 1"
    assert pattern_expr(["SLIDING", "FULL"], str) == "(SLIDING, FULL)[i % 2]"
    assert pattern_expr(["SLIDING"] * 3 + ["FULL"], str) == "(SLIDING, SLIDING, SLIDING, FULL)[i % 4]"
    expr = pattern_expr(["FULL", "FULL", "SLIDING", "FULL", "SLIDING"], str)
    assert [eval(expr, {"FULL": "F", "SLIDING": "S", "i": i}) for i in range(7)] == list("FFSFSFS")


def test_day_zero_model_type_composes_from_the_profile(tiny, tmp_path: Path) -> None:
    """qwen3 re-labelled as a model_type nobody registered (no ArchSpec; transformers does not know it either, so
    config values come from config.json through the alias table): the composed adapter runs and equals transformers
    on the original checkpoint (same weights)."""
    ckpt = _copy(tiny, "qwen3", tmp_path, "dayzero_qwen3")
    _config(ckpt, model_type="dayzero_qwen3", architectures=["DayzeroQwen3ForCausalLM"])
    result = generate(ckpt, tmp_path / "out")
    assert result.family == "composed" and result.closest_family == "qwen3" and not result.stubs
    assert result.verification == "unverified", "no reference ran: never reported as passed"
    adapter = load_adapter(tmp_path / "out/adapters/dayzero_qwen3.py").Model.from_pretrained(ckpt)
    reference = reference_model(tiny("qwen3"), torch.float32)
    g = torch.Generator().manual_seed(0)
    inputs = [torch.randint(0, 1000, (1, n), generator=g) for n in (5, 40)]
    assert max(p.relative for p in compare(adapter, reference, inputs)) <= 1e-4


def test_composed_adapter_with_an_unknown_tensor_refuses_to_run(tiny, tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    ckpt = _copy(tiny, "gpt2", tmp_path, "dayzero_gpt")
    _config(ckpt, model_type="dayzero_gpt")
    tensors = load_file(str(ckpt / "model.safetensors"))
    for i in range(2):
        tensors[f"transformer.h.{i}.attn.temperature"] = torch.ones(4)
    save_file(tensors, str(ckpt / "model.safetensors"), metadata={"format": "pt"})
    result = generate(ckpt, tmp_path / "out")
    assert {s["op"] for s in result.stubs} == {"attn_temperature"} and not result.passed
    adapter = load_adapter(tmp_path / "out/adapters/dayzero_gpt.py")
    with pytest.raises(NotRunnable, match="attn_temperature"):
        adapter.Model.from_pretrained(ckpt)


def test_config_guard_refuses_values_the_blocks_cannot_express(tiny, tmp_path: Path) -> None:
    from onboard.errors import ConfigError

    ckpt = _copy(tiny, "gpt2", tmp_path)
    generate(ckpt, tmp_path / "out")
    adapter = load_adapter(tmp_path / "out/adapters/gpt2.py")
    _config(ckpt, scale_attn_weights=False)
    with pytest.raises(ConfigError, match="scale_attn_weights=False"):
        adapter.Model.from_pretrained(ckpt)


@pytest.mark.parametrize(
    ("change", "refusal"),
    [({"do_layer_norm_before": False}, "post-norm"), ({"word_embed_proj_dim": 16}, "project_in")],
    ids=["post-norm", "projected-embeddings"],
)
def test_opt_350m_layouts_are_refused_at_load(tiny, tmp_path: Path, change: dict, refusal: str) -> None:
    """OPT's pre-norm layout composes; OPT-350m's post-norm layers and projected embeddings (same tensor names for the
    norms) are refused by the adapter's guards when it loads such a config, never run as pre-norm."""
    from onboard.errors import ConfigError

    ckpt = _copy(tiny, "opt", tmp_path)
    generate(ckpt, tmp_path / "out")
    adapter = load_adapter(tmp_path / "out/adapters/opt.py")
    _config(ckpt, **change)
    with pytest.raises(ConfigError, match=refusal):
        adapter.Model.from_pretrained(ckpt)


def test_cohere2_moe_dense_prefix_with_forced_rope_is_refused_at_load(tiny, tmp_path: Path) -> None:
    """Cohere2-MoE's dense prefix layers with prefix_dense_sliding_window_pattern 1 run rotary on full attention
    (force_rope), which the composed adapter does not: it refuses such a config by name instead of running it."""
    from onboard.errors import ConfigError

    ckpt = _copy(tiny, "cohere2_moe", tmp_path)
    generate(ckpt, tmp_path / "out")
    adapter = load_adapter(tmp_path / "out/adapters/cohere2_moe.py")
    config = json.loads((ckpt / "config.json").read_text())
    _config(ckpt, mlp_layer_types=["dense"] + config["mlp_layer_types"][1:])
    with pytest.raises(ConfigError, match="force_rope"):
        adapter.Model.from_pretrained(ckpt)


def test_every_novel_config_key_gets_a_stub(tiny, tmp_path: Path) -> None:
    """Inspect's structured novel_config_keys reach the planner in full (the novelty text shows the first 12)."""
    ckpt = _copy(tiny, "llama", tmp_path)
    keys = [f"new_knob_{k:02d}" for k in range(14)]
    _config(ckpt, **dict.fromkeys(keys, 0.5))
    profile = inspect(str(ckpt))
    assert set(keys) <= set(profile.novel_config_keys) and "…" in profile.novelty[-1]
    assert {s.op for s in plan(profile).stubs} == set(keys)


@pytest.mark.parametrize("model_type", ["gpt2", "falcon", "gpt_neox", "sarvam_mla", "granitemoeshared"])
def test_composed_families_pass_parity_through_generate(tiny, tmp_path: Path, model_type: str) -> None:
    """GPT-2 Conv1D, Falcon / NeoX fused attention, DeepSeek-style MLA + MoE, stacked experts with a shared MLP."""
    import subprocess
    import sys

    result = generate(tiny(model_type), tmp_path / "out", parity=True)
    assert result.family == "composed" and result.passed, [c.detail for c in result.checks]
    assert result.verification == "passed" and result.parity["worst"] <= 1e-4
    ruff = Path(sys.executable).parent / "ruff"
    adapter = tmp_path / "out/adapters" / f"{model_type}.py"
    for args in (["check", "--quiet"], ["format", "--check", "--quiet"]):
        proc = subprocess.run([str(ruff), *args, str(adapter)], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_block_names_mirrored_for_torch_free_planning() -> None:
    from onboard.blocks.mlp import ACTIVATIONS, GATED_ACTIVATIONS
    from onboard.blocks.rotary import ROPE_TYPES
    from onboard.generate_adapter import compose_knowledge as k

    assert k.ROPE_TYPE_NAMES == set(ROPE_TYPES)
    assert k.GATED_ACTIVATION_NAMES == set(GATED_ACTIVATIONS) and k.PLAIN_ACTIVATION_NAMES == set(ACTIVATIONS)


def test_bench_compose_quick(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """benchmarks/bench_compose.py stays working (the full run is the benchmark; this is its quick path)."""
    import importlib.util
    import sys

    bench = Path(__file__).resolve().parents[2] / "benchmarks"
    sys.path.insert(0, str(bench))
    spec = importlib.util.spec_from_file_location("bench_compose", bench / "bench_compose.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    times = module.main(["--quick", "--repeats", "1", "--dir", str(tmp_path)])
    assert times["cold"] > 0 and "warm gpt2" in times
    assert "cold  profile JSON -> files" in capsys.readouterr().out


def test_mla_latent_norms_keep_the_default_eps(tiny, tmp_path: Path) -> None:
    """transformers builds MLA's q_a / kv_a norms with RMSNorm's default eps, not config.rms_norm_eps (GLM-4-MoE-Lite
    ships 1e-5): a large rms_norm_eps must move only the layer norms, in the adapter as in the reference."""
    ckpt = _copy(tiny, "deepseek_v3", tmp_path)
    _config(ckpt, rms_norm_eps=1e-2)
    report = check_parity(ADAPTERS_DIR / "deepseek_v3.py", ckpt)
    assert report["passed"], report["detail"]


def test_group_limited_routing_ranks_groups_by_max_or_top2_sum() -> None:
    """DeepSeek-V2 group_limited_greedy keeps the group with the best expert; V3 noaux_tc the best two experts."""
    from onboard.blocks.moe import RouterSpec, route

    # group 0: one strong expert (0.9) and a weak one; group 1: two good ones (0.6 + 0.5 > 0.9 + 0.0)
    logits = torch.tensor([[0.9, 0.0, 0.6, 0.5]]).log()
    spec = {"top_k": 1, "norm_topk_prob": False, "n_group": 2, "topk_group": 1}
    _, by_max = route(logits, RouterSpec(**spec, group_score="max"), None)
    _, by_sum = route(logits, RouterSpec(**spec), None)
    assert by_max.tolist() == [[0]] and by_sum.tolist() == [[2]]


@pytest.mark.parametrize("model_type", ["gpt2", "sarvam_mla"])
def test_composed_adapters_in_bfloat16(tiny, tmp_path: Path, model_type: str) -> None:
    """In the served dtype the composed adapter's error stays within transformers' own bf16 error (parity.py's rule)."""
    ckpt = tiny(model_type, "bfloat16")
    generate(ckpt, tmp_path / "out")
    report = check_parity(tmp_path / "out/adapters" / f"{model_type}.py", ckpt, dtype="bfloat16")
    assert report["passed"], report["detail"]


def test_afmoe_mup_input_scaling_composes(tiny, tmp_path: Path) -> None:
    """AFMoE with mup_enabled multiplies the embeddings by sqrt(hidden): inspect reports it, the composed adapter
    applies it (read from the config, so one adapter serves both settings) and parity passes."""
    import shutil

    ckpt = tmp_path / "afmoe-mup"
    shutil.copytree(tiny("afmoe"), ckpt)
    _config(ckpt, mup_enabled=True)
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


def test_a_profile_without_config_keys_is_refused(tiny) -> None:
    """An older profile JSON (no config_keys) would skip the unread-config-field stubs: refused, not silently planned."""
    from onboard.errors import InputError

    with pytest.raises(InputError, match="lists no config keys"):
        plan(msgspec.structs.replace(inspect(str(tiny("llama"))), config_keys=(), novel_config_keys=()))


# --- parity when one side raises ---------------------------------------------------------------------------------


def test_parity_reports_an_adapter_that_refuses_its_config_as_failed(tiny, tmp_path: Path) -> None:
    """OPT-350m's post-norm config, refused by the composed adapter's guard at load: `generate --parity` gives a
    failed adapter_parity check naming the refusal, with the adapter files written, not an internal error."""
    ckpt = _copy(tiny, "opt", tmp_path)
    _config(ckpt, do_layer_norm_before=False)
    result = generate(ckpt, tmp_path / "out", parity=True)
    check = next(c for c in result.checks if c.name == "adapter_parity")
    assert not check.passed and check.required
    assert "the adapter in float32 raised ConfigError" in check.detail and "post-norm" in check.detail
    assert result.parity["status"] == "failed" and result.verification == "failed"
    assert (tmp_path / "out/adapters/opt.py").is_file()


class _RaisesIn(torch.nn.Module):
    """A reference that runs in float32 and raises in `dtype` (as XGLM's mask fill overflows in float64)."""

    def __init__(self, model: torch.nn.Module, dtype: torch.dtype) -> None:
        super().__init__()
        self.model, self.dtype = model, dtype

    def forward(self, input_ids: torch.Tensor) -> object:
        if next(self.model.parameters()).dtype == self.dtype:
            raise RuntimeError(f"value cannot be converted to type {self.dtype} without overflow")
        return self.model(input_ids=input_ids)


@pytest.mark.parametrize(("raises_in", "says"), [(torch.float32, "the reference in float32 raised RuntimeError"),
                                                  (torch.float64, "calibration run in float64 raised RuntimeError")])  # fmt: skip
def test_parity_with_a_reference_that_raises_is_unverified(tiny, tmp_path: Path, raises_in, says: str) -> None:
    """The reference failing (in the truth run, or in the calibration run the tolerance comes from) leaves nothing
    to judge against: unverified, never passed, naming the dtype and the error."""
    ckpt = _copy(tiny, "llama", tmp_path)
    reference = _RaisesIn(reference_model(ckpt, torch.float32), raises_in)
    report = check_parity(ADAPTERS_DIR / "llama.py", ckpt, reference=reference)
    assert report["passed"] is False and report["status"] == "unverified"
    assert report["detail"].startswith("unverified: ") and says in report["detail"]
    assert "overflow" in report["detail"]
    # The same reference without the fault passes: the verdict above is the fault's.
    assert check_parity(ADAPTERS_DIR / "llama.py", ckpt, reference=_RaisesIn(reference.model, torch.int8))["passed"]


# --- A.X-K1: the MoE block's output norm ---------------------------------------------------------------------------


def _store_dense_post_mlp_norm(ckpt: Path) -> None:
    """As the released A.X-K1 checkpoints: a post_mlp_layernorm stored for the dense layer 0 as well."""
    from safetensors.torch import load_file, save_file

    tensors = load_file(ckpt / "model.safetensors")
    tensors["model.layers.0.post_mlp_layernorm.weight"] = tensors["model.layers.1.post_mlp_layernorm.weight"] * 3
    save_file(tensors, ckpt / "model.safetensors", metadata={"format": "pt"})


def test_axk1_post_mlp_norm_is_the_moe_blocks_output_norm(tiny, tmp_path: Path, monkeypatch) -> None:
    """A norm after the feed-forward block on exactly the MoE layers is the MoE block's output norm: composed from
    the tensors alone (no family fact needed), parity passing; a dense layer's stored copy (the released layout),
    which A.X-K1's code never applies, is dropped by the family fact, and parity still passes."""
    from onboard.generate_adapter import compose_knowledge

    ckpt = _copy(tiny, "axk1", tmp_path)
    no_fact = {k: v for k, v in compose_knowledge.FAMILY_FACTS.items() if k != "axk1"}
    with monkeypatch.context() as m:
        m.setattr(compose_knowledge, "FAMILY_FACTS", no_fact)
        m.setattr("onboard.generate_adapter.compose_rules.FAMILY_FACTS", no_fact)
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

    ckpt = _copy(tiny, "gpt_neox_japanese", tmp_path)
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

    ckpt = _copy(tiny, "llama", tmp_path)
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
    ckpt = _copy(tiny, model_type, tmp_path)
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

    ckpt = _copy(tiny, "glm_moe_dsa", tmp_path)
    generate(ckpt, tmp_path / "out")
    adapter = load_adapter(tmp_path / "out/adapters/glm_moe_dsa.py")
    _config(ckpt, indexer_types=["full", "shared", "full"])
    with pytest.raises(ConfigError, match="previous layer's top-k"):
        adapter.Model.from_pretrained(ckpt)


def test_mimo_v2_flash_asymmetric_heads_compose_from_the_shapes(tiny, tmp_path: Path) -> None:
    """MiMo-V2-Flash: values narrower than queries and keys (v_head_dim 8 vs 16), its sliding layers with twice the
    KV heads (read from each layer's k/v widths) and the only ones with sinks, values scaled by
    attention_value_scale: composed without a family fact, parity passing."""
    ckpt = _copy(tiny, "mimo_v2_flash", tmp_path)
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
    ckpt = _copy(tiny, "diffllama", tmp_path)
    result = generate(ckpt, tmp_path / "out", parity=True)
    assert result.parity["passed"], result.parity["detail"]
    adapter = tmp_path / "out/adapters/diffllama.py"
    source = adapter.read_text()
    assert "differential=True, layer_index=i," in " ".join(source.split())
    adapter.write_text(source.replace("layer_index=i,", "layer_index=0,"))
    assert not check_parity(adapter, ckpt)["passed"]


def _composed_adapter(ckpt: Path, out: Path) -> Path:
    """The adapter composed from the profile alone (a registered family's ArchSpec ignored), written to `out`."""
    out.mkdir(parents=True, exist_ok=True)
    the_plan = plan(inspect(str(ckpt)), compose_only=True)
    assert not the_plan.stubs, the_plan.stubs
    path = out / f"{the_plan.model_type}.py"
    path.write_text(adapter_source(the_plan))
    return path


def test_phimoe_sparsemixer_routing_is_a_family_fact(tiny, tmp_path: Path, monkeypatch) -> None:
    """PhiMoE's router tensor is a plain gate: only its code shows the sparsemixer top-2 routing. With the family
    fact the adapter composed without PhiMoE's ArchSpec passes parity and refuses another top-k at load; composed
    as a plain softmax top-2 MoE (the fact removed), parity fails: the routing is what the fact carries."""
    from onboard.errors import ConfigError
    from onboard.generate_adapter import compose_knowledge

    ckpt = _copy(tiny, "phimoe", tmp_path)
    adapter = _composed_adapter(ckpt, tmp_path / "fact")
    assert "SparseMixerMoE(" in adapter.read_text()
    assert check_parity(adapter, ckpt)["passed"]
    no_fact = {k: v for k, v in compose_knowledge.FAMILY_FACTS.items() if k != "phimoe"}
    with monkeypatch.context() as m:
        m.setattr("onboard.generate_adapter.compose_rules.FAMILY_FACTS", no_fact)
        plain = _composed_adapter(ckpt, tmp_path / "plain")
    assert "SparseMixerMoE(" not in plain.read_text()
    assert not check_parity(plain, ckpt)["passed"]
    _config(ckpt, num_experts_per_tok=3)
    with pytest.raises(ConfigError, match="top-2 only"):
        load_adapter(adapter).Model.from_pretrained(ckpt)


def test_gpt_oss_experts_compose_with_the_family_fact_only(tiny, tmp_path: Path, monkeypatch) -> None:
    """gpt-oss without its ArchSpec: the family fact names its experts' layout (gate and up in alternating
    columns) and clamped SwiGLU, which the tensors cannot show; parity passes. Without the fact, the expert and
    router biases are named as what the MoE block lacks, never guessed."""
    from onboard.generate_adapter import compose_knowledge

    ckpt = _copy(tiny, "gpt_oss", tmp_path)
    adapter = _composed_adapter(ckpt, tmp_path / "fact")
    assert "GptOssMoE(" in adapter.read_text()
    assert check_parity(adapter, ckpt)["passed"]
    no_fact = {k: v for k, v in compose_knowledge.FAMILY_FACTS.items() if k != "gpt_oss"}
    monkeypatch.setattr("onboard.generate_adapter.compose_rules.FAMILY_FACTS", no_fact)
    stubs = {s.op: s.reason for s in plan(inspect(str(ckpt)), compose_only=True).stubs}
    assert "experts.gate_up_proj_bias" in stubs["moe_biases"] and "router.bias" in stubs["moe_biases"]


@pytest.mark.parametrize("model_type", ["lfm2", "lfm2_moe", "lfm3"])
def test_lfm_short_convolution_layers_compose(tiny, tmp_path: Path, monkeypatch, model_type: str) -> None:
    """LFM2 / LFM2-MoE / LFM3: gated short convolutions on the `conv` layers, attention on the others (LFM3: a
    sigmoid gate per head, sandwich norms); SwiGLU and the norm named embedding_norm applied after the last layer
    are family facts (the code fixes both). Parity passes; without the facts the composer names both instead of
    guessing."""
    from onboard.generate_adapter import compose_knowledge

    ckpt = _copy(tiny, model_type, tmp_path)
    result = generate(ckpt, tmp_path / "out", parity=True)
    assert result.parity["passed"], result.parity["detail"]
    source = " ".join((tmp_path / f"out/adapters/{model_type}.py").read_text().split())
    assert 'ShortConv(args.hidden_size, args.conv_L_cache, bias=args.conv_bias) if layer_type == "conv" else' in source
    no_fact = {k: v for k, v in compose_knowledge.FAMILY_FACTS.items() if k != model_type}
    monkeypatch.setattr("onboard.generate_adapter.compose_rules.FAMILY_FACTS", no_fact)
    stubs = {s.op for s in plan(inspect(str(ckpt)), compose_only=True).stubs}
    assert {"embedding_norm", "activation_none"} <= stubs


@pytest.mark.parametrize("model_type", ["qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"])
def test_gated_deltanet_layers_compose(tiny, tmp_path: Path, model_type: str) -> None:
    """Qwen3-Next (q, k, v, z and b, a grouped per key head in in_proj_qkvz / in_proj_ba, read through the
    grouped_rows op) and Qwen3.5 (separate projections): Gated DeltaNet on the linear_attention layers, gated
    attention on the others, composed without a family fact; parity passes. Inspect gives Qwen3.5's text models
    their (1 + w) RMSNorms, as Qwen3-Next's."""
    ckpt = _copy(tiny, model_type, tmp_path)
    assert inspect(str(ckpt)).norms.offset == 1.0
    result = generate(ckpt, tmp_path / "out", parity=True)
    assert result.parity["passed"], result.parity["detail"]
    assert result.overrides == ()
    source = " ".join((tmp_path / f"out/adapters/{model_type}.py").read_text().split())
    assert 'if layer_type == "linear_attention" else Attention(' in source
    assert ("grouped_rows" in source) == (model_type == "qwen3_next")


@pytest.mark.parametrize("model_type", ["lfm2", "qwen3_next", "deepseek_v32", "mimo_v2_flash"])
def test_new_mixers_pass_parity_in_bfloat16(tiny, tmp_path: Path, model_type: str) -> None:
    """The dtype engines serve: the short convolution, Gated DeltaNet (its recurrence in float32 as transformers'),
    the DSA indexer and asymmetric heads, composed, agree with transformers in bfloat16 within the noise of
    transformers' own bfloat16 runs (the comparator's calibrated verdict)."""
    ckpt = _copy(tiny, model_type, tmp_path)
    report = check_parity(_composed_adapter(ckpt, tmp_path / "out"), ckpt, "bfloat16")
    assert report["passed"], report["detail"]
    assert report["reference_worst"] is not None  # judged against transformers' own bfloat16 run


def test_bloom_alibi_and_embedding_norm_compose(tiny, tmp_path: Path) -> None:
    """BLOOM: ALiBi instead of positions, a LayerNorm on the embeddings, query_key_value grouped per head and its
    tanh GELU (family facts: the code fixes both) compose, parity passing; slow_but_exact (output projections summed
    in pretraining_tp slices) is refused at load rather than run unmodelled."""
    from onboard.errors import ConfigError

    ckpt = _copy(tiny, "bloom", tmp_path)
    result = generate(ckpt, tmp_path / "out", parity=True)
    assert result.parity["passed"], result.parity["detail"]
    source = " ".join((tmp_path / "out/adapters/bloom.py").read_text().split())
    assert "alibi=True" in source and "model.embed_norm.weight" in source
    _config(ckpt, slow_but_exact=True, pretraining_tp=2)
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
    ckpt = _copy(tiny, "codegen", tmp_path)
    adapter = _composed_adapter(ckpt, tmp_path / "out")
    assert check_parity(adapter, ckpt)["passed"]
    plain = re.sub(r',\s*"codegen_qkv"', "", adapter.read_text())
    assert plain != adapter.read_text()
    adapter.write_text(plain)
    assert not check_parity(adapter, ckpt)["passed"]
