"""Adapters composed from the profile alone: config values resolved as transformers resolves them (one alias
table), weight maps inferred from tensor names and shapes (ambiguity is an error naming the tensors), day-zero model
types composed with no committed adapter, inspect's structured novelty handed over in full."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import replace
from pathlib import Path

import msgspec
import pytest
import torch

from onboard.generate_adapter import generate
from onboard.generate_adapter.compose_rules import compress, pattern_expr
from onboard.generate_adapter.config_values import read_config
from onboard.generate_adapter.loader import _combine, deinterleave_heads
from onboard.generate_adapter.parity import check_parity, compare, load_adapter, reference_model
from onboard.generate_adapter.plan import plan
from onboard.generate_adapter.regenerate import ADAPTERS_DIR
from onboard.generate_adapter.runtime import NotRunnable
from onboard.generate_adapter.weight_inference import AmbiguousWeights
from onboard.inspect_checkpoint import inspect
from onboard.names.tensors import classify
from onboard.profile import TensorGroupStat
from tests.generate.conftest import copy_tiny, edit_config, within_tolerance

# --- config values ---------------------------------------------------------------------------------------------


def test_rope_scaling_over_rope_parameters_is_read_as_transformers_reads_it(tiny, tmp_path: Path) -> None:
    """A legacy rope_scaling {linear, x4} next to rope_parameters {default}: transformers 5 applies linear x4;
    so does the adapter (it used the default rope before config values went through transformers' class)."""
    ckpt = copy_tiny(tiny, "llama", tmp_path)
    edit_config(ckpt, rope_scaling={"rope_type": "linear", "factor": 4.0})
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


def test_transformers_tagged_floats_are_read_back() -> None:
    """transformers writes inf / nan as {"__float__": "Infinity"} (every Mamba-2 hybrid's time_step_limit) and its
    config class rejects the tag itself: read back as floats, for known and day-zero model types alike."""
    tagged = {"time_step_limit": [0.0, {"__float__": "Infinity"}], "nested": {"x": {"__float__": "-Infinity"}}}
    bamba = read_config({"model_type": "bamba", "hidden_size": 32, "mamba_n_heads": 4, **tagged})
    assert bamba.get("time_step_limit") == (0.0, float("inf")) and bamba.source.startswith("transformers")
    raw = read_config({"model_type": "dayzero_x", **tagged})
    assert raw.get("time_step_limit") == [0.0, float("inf")] and raw.get("nested") == {"x": float("-inf")}


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

    ckpt = copy_tiny(tiny, "gpt_neox", tmp_path, "dayzero_neox")
    edit_config(ckpt, model_type="dayzero_neox", num_key_value_heads=2)
    env = {"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [sys.executable, "-m", "onboard", "generate", str(ckpt), "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
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
    """qwen3 re-labelled as a model_type nobody registered (no committed adapter; transformers does not know it either, so
    config values come from config.json through the alias table): the composed adapter runs and equals transformers
    on the original checkpoint (same weights)."""
    ckpt = copy_tiny(tiny, "qwen3", tmp_path, "dayzero_qwen3")
    edit_config(ckpt, model_type="dayzero_qwen3", architectures=["DayzeroQwen3ForCausalLM"])
    result = generate(ckpt, tmp_path / "out")
    assert result.closest_family == "qwen3" and not result.stubs
    assert result.verification == "unverified", "no reference ran: never reported as passed"
    adapter = load_adapter(tmp_path / "out/adapters/dayzero_qwen3.py").Model.from_pretrained(ckpt)
    reference = reference_model(tiny("qwen3"), torch.float32)
    g = torch.Generator().manual_seed(0)
    inputs = [torch.randint(0, 1000, (1, n), generator=g) for n in (5, 40)]
    assert max(p.relative for p in compare(adapter, reference, inputs)) <= 1e-4


def test_composed_adapter_with_an_unknown_tensor_refuses_to_run(tiny, tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    ckpt = copy_tiny(tiny, "gpt2", tmp_path, "dayzero_gpt")
    edit_config(ckpt, model_type="dayzero_gpt")
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

    ckpt = copy_tiny(tiny, "gpt2", tmp_path)
    generate(ckpt, tmp_path / "out")
    adapter = load_adapter(tmp_path / "out/adapters/gpt2.py")
    edit_config(ckpt, scale_attn_weights=False)
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

    ckpt = copy_tiny(tiny, "opt", tmp_path)
    generate(ckpt, tmp_path / "out")
    adapter = load_adapter(tmp_path / "out/adapters/opt.py")
    edit_config(ckpt, **change)
    with pytest.raises(ConfigError, match=refusal):
        adapter.Model.from_pretrained(ckpt)


def test_cohere2_moe_dense_prefix_with_forced_rope_is_refused_at_load(tiny, tmp_path: Path) -> None:
    """Cohere2-MoE's dense prefix layers with prefix_dense_sliding_window_pattern 1 run rotary on full attention
    (force_rope), which the composed adapter does not: it refuses such a config by name instead of running it."""
    from onboard.errors import ConfigError

    ckpt = copy_tiny(tiny, "cohere2_moe", tmp_path)
    generate(ckpt, tmp_path / "out")
    adapter = load_adapter(tmp_path / "out/adapters/cohere2_moe.py")
    config = json.loads((ckpt / "config.json").read_text())
    edit_config(ckpt, mlp_layer_types=["dense"] + config["mlp_layer_types"][1:])
    with pytest.raises(ConfigError, match="force_rope"):
        adapter.Model.from_pretrained(ckpt)


def test_output_changing_mamba_keys_are_not_neutral(tiny, tmp_path: Path) -> None:
    """residual_in_fp32 (the residual stream in float32: bfloat16 outputs differ) and time_step_limit (clamps dt) change
    the forward pass: a family whose blocks do not read them gets a stub for each, never a silent default; and the
    scan's chunk length, a runtime choice, stays neutral."""
    ckpt = copy_tiny(tiny, "llama", tmp_path)
    edit_config(ckpt, residual_in_fp32=True, time_step_limit=[0.0, 0.1], mamba_chunk_size=128)
    stubs = {s.op for s in plan(inspect(str(ckpt))).stubs}
    assert {"residual_in_fp32", "time_step_limit"} <= stubs and "mamba_chunk_size" not in stubs


def test_every_novel_config_key_gets_a_stub(tiny, tmp_path: Path) -> None:
    """Inspect's structured novel_config_keys reach the planner in full (the novelty text shows the first 12)."""
    ckpt = copy_tiny(tiny, "llama", tmp_path)
    keys = [f"new_knob_{k:02d}" for k in range(14)]
    edit_config(ckpt, **dict.fromkeys(keys, 0.5))
    profile = inspect(str(ckpt))
    assert set(keys) <= set(profile.novel_config_keys) and "…" in profile.novelty[-1]
    assert {s.op for s in plan(profile).stubs} == set(keys)


def test_every_guarded_key_has_an_effect_inspect_names() -> None:
    """A key generated adapters read to refuse values (compose_knowledge.GUARDS) changes the numbers, so inspect's lint
    names its effect (config_lint.KERNEL_FACTS) instead of calling it unknown, or harmless (IGNORED)."""
    from onboard.generate_adapter.compose_knowledge import GUARDS
    from onboard.names.config_keys import IGNORED, KERNEL_FACTS, neutral_for_adapters

    missing = GUARDS.keys() - KERNEL_FACTS.keys()
    assert not missing, f"add {sorted(missing)} to KERNEL_FACTS in onboard/names/config_keys.py"
    harmless = GUARDS.keys() & IGNORED.keys()
    assert not harmless, f"{sorted(harmless)} change the numbers: take them out of names.config_keys.IGNORED"
    unread = [key for key in GUARDS if neutral_for_adapters(key)]
    assert not unread, f"{unread} are guarded: take them out of names.config_keys' neutral tables"


def test_a_plain_value_is_what_the_guarded_adapter_assumes() -> None:
    """One truth for a guarded key: the values inspect's lint calls plain (PLAIN_VALUES: no finding) are the
    adapter's default and pass its guard; a value the adapter reads as a choice (topk_method "greedy" ignores the
    expert groups) is not plain."""
    from types import SimpleNamespace

    from onboard.generate_adapter.compose_knowledge import GUARD_FIELDS, GUARDS
    from onboard.names.config_keys import PLAIN_VALUES

    for key in GUARDS.keys() & PLAIN_VALUES.keys():
        _, default, test, _ = GUARDS[key]
        assert eval(default) in PLAIN_VALUES[key], key  # noqa: S307 - a literal from our own table
        others = {name: eval(value) for name, _, value in GUARD_FIELDS.get(key, ())}  # noqa: S307
        for plain in PLAIN_VALUES[key]:
            args = SimpleNamespace(**others, **{key: plain})
            assert not eval(test, {}, {"self": args}), f"{key}={plain!r} is called plain but the guard refuses it"  # noqa: S307


@pytest.mark.parametrize("model_type", ["gpt2", "falcon", "gpt_neox", "sarvam_mla", "granitemoeshared", "nemotron_h"])
def test_composed_families_pass_parity_through_generate(tiny, tmp_path: Path, model_type: str) -> None:
    """GPT-2 Conv1D, Falcon / NeoX fused attention, DeepSeek-style MLA + MoE, stacked experts with a shared MLP,
    Nemotron-H's per-layer block chosen by a chain of conditionals (laid out as ruff format lays it out)."""
    import subprocess
    import sys

    result = generate(tiny(model_type), tmp_path / "out", parity=True)
    assert result.passed, [c.detail for c in result.checks]
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
    ckpt = copy_tiny(tiny, "deepseek_v3", tmp_path)
    edit_config(ckpt, rms_norm_eps=1e-2)
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
    assert within_tolerance(report), report["detail"]


def test_a_profile_without_config_keys_is_refused(tiny) -> None:
    """An older profile JSON (no config_keys) would skip the unread-config-field stubs: refused, not silently planned."""
    from onboard.errors import InputError

    with pytest.raises(InputError, match="lists no config keys"):
        plan(msgspec.structs.replace(inspect(str(tiny("llama"))), config_keys=(), novel_config_keys=()))


# --- parity when one side raises ---------------------------------------------------------------------------------


def test_parity_reports_an_adapter_that_refuses_its_config_as_failed(tiny, tmp_path: Path) -> None:
    """An MPT config whose ALiBi maximum the block cannot express, refused by the composed adapter's guard at load:
    `generate --parity` gives a failed adapter_parity check naming the refusal, with the adapter files written, not
    an internal error."""
    ckpt = copy_tiny(tiny, "mpt", tmp_path)
    config = json.loads((ckpt / "config.json").read_text())
    edit_config(ckpt, attn_config={**config["attn_config"], "alibi_bias_max": 4})
    result = generate(ckpt, tmp_path / "out", parity=True)
    check = next(c for c in result.checks if c.name == "adapter_parity")
    assert not check.passed and check.required
    assert "the adapter in float32 raised ConfigError" in check.detail and "alibi_bias_max" in check.detail
    assert result.parity["status"] == "failed" and result.verification == "failed"
    assert (tmp_path / "out/adapters/mpt.py").is_file()


class _RaisesIn(torch.nn.Module):
    """A reference that runs in float32 and raises in `dtype` (as XGLM's mask fill overflows in float64)."""

    def __init__(self, model: torch.nn.Module, dtype: torch.dtype) -> None:
        super().__init__()
        self.model, self.dtype = model, dtype

    def forward(self, input_ids: torch.Tensor) -> object:
        if next(self.model.parameters()).dtype == self.dtype:
            raise RuntimeError(f"value cannot be converted to type {self.dtype} without overflow")
        return self.model(input_ids=input_ids)


@pytest.mark.parametrize(
    ("raises_in", "says"),
    [
        (torch.float32, "the reference in float32 raised RuntimeError"),
        (torch.float64, "calibration run in float64 raised RuntimeError"),
    ],
)
def test_parity_with_a_reference_that_raises_is_unverified(tiny, tmp_path: Path, raises_in, says: str) -> None:
    """The reference failing (in the truth run, or in the calibration run the tolerance comes from) leaves nothing
    to judge against: unverified, never passed, naming the dtype and the error."""
    ckpt = copy_tiny(tiny, "llama", tmp_path)
    reference = _RaisesIn(reference_model(ckpt, torch.float32), raises_in)
    report = check_parity(ADAPTERS_DIR / "llama.py", ckpt, reference=reference)
    assert report["passed"] is False and report["status"] == "unverified"
    assert report["detail"].startswith("unverified: ") and says in report["detail"]
    assert "overflow" in report["detail"]
    # The same reference without the fault passes: the verdict above is the fault's.
    assert check_parity(ADAPTERS_DIR / "llama.py", ckpt, reference=_RaisesIn(reference.model, torch.int8))["passed"]
