"""Odd or corrupt configs give a profile with findings or a clean ConfigError: never another exception."""

from __future__ import annotations

import json

import pytest

from onboard.errors import ConfigError
from onboard.inspect_checkpoint import profile_from_parts
from onboard.inspect_checkpoint.families import catalog
from onboard.profile import ModelProfile

ODD = [
    {},
    {"model_type": "brand_new_arch"},
    {"hidden_size": "abc", "num_hidden_layers": "3"},
    {"layer_types": "full", "num_hidden_layers": 2},
    {"rope_scaling": [1, 2]},
    {"rope_parameters": {"full_attention": 3}},
    {"rope_parameters": {"rope_theta": "big"}},
    {"num_attention_heads": 0, "hidden_size": 64},
    {"quantization_config": "fp8"},
    {"quantization_config": {"weight_block_size": "x"}},
    {"num_local_experts": "8"},
    {"num_local_experts": 8, "num_experts_per_tok": 100, "num_hidden_layers": 2},
    {"attention_types": [["global"]]},
    {"attention_types": [[["global", "local"], "x"]], "num_hidden_layers": 2},
    {"hybrid_override_pattern": 5},
    {"text_config": {"hidden_size": 8}, "model_type": "llava"},
    {"no_rope_layers": [0], "num_hidden_layers": 3},
    {"architectures": "Llama"},
    {"sliding_window": -5, "model_type": "mistral", "num_hidden_layers": 2},
    {"max_position_embeddings": "lots"},
    {"layer_types": [1, None], "num_hidden_layers": 2},
    {"layer_types": ["full_attention"] * 3, "num_hidden_layers": 2},
    {"ffn_config": {"moe_num_experts": "x"}, "attn_config": []},
]


@pytest.mark.parametrize("config", ODD, ids=[json.dumps(c)[:40] for c in ODD])
def test_odd_config_gives_profile(config):
    p = profile_from_parts(config, None)
    assert ModelProfile.from_json(p.to_json()) == p


def test_wrong_types_are_named():
    p = profile_from_parts({"hidden_size": "abc", "num_hidden_layers": 2}, None)
    assert any(f.code == "config-field-type" and "hidden_size" in f.message for f in p.findings)


@pytest.mark.parametrize(
    ("key", "base"),
    [("sliding_window_pattern", {"model_type": "gemma3_text", "sliding_window": 512}),
     ("attn_layer_period", {"model_type": "jamba"}), ("full_attention_interval", {"model_type": "qwen3_next"}),
     ("global_attn_every_n_layers", {"model_type": "afmoe", "sliding_window": 512}),
     ("no_rope_layer_interval", {"model_type": "smollm3"})],
)  # fmt: skip
@pytest.mark.parametrize("value", [0, -2])
def test_a_layer_period_below_one_is_named_not_divided_by(key: str, base: dict, value: int) -> None:
    # Gemma 3 with sliding_window_pattern 0 raised ZeroDivisionError (found by mutating the real configs'
    # fields); a negative period planned nonsense silently. Every "every n-th layer" key is read as a period now.
    p = profile_from_parts({**base, "hidden_size": 64, "num_hidden_layers": 4, key: value}, None)
    named = [f for f in p.findings if f.code == "config-field-type" and key in f.message]
    assert named and "positive integer" in named[0].message, p.findings
    assert len(p.layers) == 4


@pytest.mark.parametrize("config", [{"num_hidden_layers": -1}, {"num_hidden_layers": 10**9}, {"vocab_size": 2**40}])
def test_implausible_sizes_are_clean_errors(config):
    with pytest.raises(ConfigError, match="not a plausible value"):
        profile_from_parts(config, None)


def test_every_known_family_default_config_profiles():
    """The catalog was built by running the analysis over each family's default config: all must be present."""
    fams = catalog()
    assert len(fams) >= 150
    for must in ("llama", "qwen3_next", "deepseek_v3", "gpt_oss", "mamba2", "jamba", "lfm2", "nemotron_h"):
        assert must in fams, f"{must} missing from onboard/data/families.json: rerun scripts/build_family_catalog.py"


@pytest.mark.parametrize("value", [True, False])
def test_rope_interleave_is_a_profile_fact_not_a_warning(value: bool) -> None:
    # DeepSeek-V3 and Kimi K2 rotate (even, odd) pairs: the adapters apply it (MLAttention rope_interleaved), so the
    # profile records it and no "not modelled" warning is raised.
    config = {"model_type": "deepseek_v3", "hidden_size": 64, "num_hidden_layers": 2, "rope_theta": 10000.0,
              "rope_interleave": value}  # fmt: skip
    p = profile_from_parts(config, None)
    assert p.rope is not None and p.rope.interleaved is value
    assert not [f for f in p.findings if "rope_interleave" in f.message]


def test_kernel_facts_the_adapters_apply_are_info_not_unmodelled_warnings() -> None:
    # gpt-oss's SwiGLU clamp and alpha, OLMo's q/k/v clamp: the adapters apply them (Attention clip_qkv, the gpt-oss
    # experts), so inspect names them for the kernel author instead of warning that nothing models them.
    config = {"model_type": "olmo", "hidden_size": 64, "num_hidden_layers": 2, "clip_qkv": 8.0, "swiglu_limit": 7.0}
    findings = profile_from_parts(config, None).findings
    kernel = {f.message.split(" ", 1)[0]: f for f in findings if f.code == "config-kernel-fact"}
    assert set(kernel) == {"clip_qkv", "swiglu_limit"} and all(f.severity == "info" for f in kernel.values())
    assert not [f for f in findings if f.code in ("config-unmodelled-field", "config-unknown-field")]


def test_training_only_keys_by_name_are_not_unknown_fields() -> None:
    # One list of training-only words (config_lint.TRAINING_WORDS) for inspect's lint and generate's composition:
    # BioGPT's activation_dropout, DBRX's emb_pdrop, PhiMoE's input_jitter_noise used to fail config_lint_clean.
    config = {"model_type": "newlm", "hidden_size": 64, "num_hidden_layers": 2, "activation_dropout": 0.1,
              "emb_pdrop": 0.0, "input_jitter_noise": 0.01, "layerdrop": 0.1, "brand_new_knob": 3}  # fmt: skip
    unknown = [f.message for f in profile_from_parts(config, None).findings if f.code == "config-unknown-field"]
    assert unknown == ["unknown field brand_new_knob: check whether it changes the forward pass"], unknown


def _codes(config: dict) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for f in profile_from_parts(config, None).findings:
        out.setdefault(f.code, []).append(f.message)
    return out


def test_keys_whose_effect_the_tensors_show_are_not_unknown() -> None:
    # Cohere's use_qk_norm, StableLM's qk_layernorm, OPT's enable_bias, LFM2's MLP width rule: inspect reads their
    # effect from the tensors or the per-layer plan (config_lint.STRUCTURAL_KEYS, the table generate uses too), so
    # composed families whose parity passes no longer fail config_lint_clean on them.
    config = {"model_type": "newlm", "hidden_size": 64, "num_hidden_layers": 2, "use_qk_norm": True,
              "qk_layernorm": True, "enable_bias": True, "block_multiple_of": 256, "global_attn_every_n_layers": 4,
              "brand_new_knob": 3}  # fmt: skip
    unknown = _codes(config).get("config-unknown-field", [])
    assert unknown == ["unknown field brand_new_knob: check whether it changes the forward pass"], unknown


@pytest.mark.parametrize(
    ("key", "plain", "other"),
    [("do_layer_norm_before", True, False), ("scale_attn_weights", True, False),
     ("shared_expert_combination_strategy", "sum", "average"), ("scale_attn_by_inverse_layer_idx", False, True),
     ("attention_value_scale", None, 0.707), ("full_attn_alpha_factor", 1, 3.5565588200778455),
     ("linear_attn_beta_factor", 1.0, 2.0), ("mlp_alpha_factor", 1, 3.5565588200778455)],
)  # fmt: skip
def test_a_kernel_fact_is_reported_only_for_a_value_that_changes_the_numbers(key: str, plain: object, other: object):
    # OPT-350m's post-norm layers (do_layer_norm_before false) used to read as a "runtime hint" or an unknown field;
    # the plain value (pre-norm) is the computation every block does, so it is not reported.
    base = {"model_type": "newlm", "hidden_size": 64, "num_hidden_layers": 2}
    assert not [m for m in _codes({**base, key: plain}).get("config-kernel-fact", []) if key in m]
    facts = [m for m in _codes({**base, key: other}).get("config-kernel-fact", []) if m.startswith(f"{key} = ")]
    assert facts and repr(other) in facts[0], facts
    assert not _codes({**base, key: other}).get("config-unknown-field")


def test_two_spellings_of_one_fact_with_different_values_are_named() -> None:
    # Falcon saved by transformers 5 writes num_kv_heads (a stale default) beside num_key_value_heads; Cohere2-MoE
    # keeps a top-level rope_theta beside rope_parameters. Both spellings are read (neither is "unknown"), and a
    # disagreement is reported, naming the one onboard reads.
    config = {"model_type": "newlm", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "num_kv_heads": 4, "rope_theta": 1e6,
              "rope_parameters": {"rope_type": "default", "rope_theta": 1e4}}  # fmt: skip
    codes = _codes(config)
    assert not codes.get("config-unknown-field"), codes
    conflicts = codes["config-alias-conflict"]
    assert conflicts == [
        "num_kv_heads = 4 and num_key_value_heads = 2 spell one fact with different values; onboard reads "
        "num_key_value_heads",
        "rope_theta = 1000000.0 and rope_parameters.rope_theta spell one fact with different values; onboard reads "
        "rope_parameters.rope_theta",
    ], conflicts
    p = profile_from_parts(config, None)
    assert p.dims.num_kv_heads == 2 and p.rope is not None and p.rope.theta == 1e4
    agreeing = {**config, "num_kv_heads": 2, "rope_theta": 1e4}
    assert "config-alias-conflict" not in _codes(agreeing)


@pytest.mark.parametrize("model_type", ["stablelm", "cohere"])
def test_a_qk_norm_flag_without_its_tensors_is_a_config_mismatch(model_type: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # The lint counts use_qk_norm / qk_layernorm as read because the tensors show the norm; an export that dropped
    # them contradicts the flag (transformers would run the norm with initial weights): a config-* warning, which
    # fails config_lint_clean. StableLM stores per-head norms (q_layernorm.norms.0), Cohere a (heads, head_dim) q_norm.
    from safetensors.torch import load_file, save_file

    from onboard.inspect_checkpoint import inspect
    from tests.tiny.factory import make_tiny_checkpoint

    ckpt = make_tiny_checkpoint(model_type, tmp_path / model_type)
    flag = "qk_layernorm" if model_type == "stablelm" else "use_qk_norm"
    assert json.loads((ckpt / "config.json").read_text())[flag] is True
    assert not [f for f in inspect(str(ckpt)).findings if f.code.startswith("config-") and f.severity != "info"]
    weights = ckpt / "model.safetensors"
    qk = (".q_layernorm.", ".k_layernorm.", ".q_norm.", ".k_norm.")
    stored = load_file(weights)
    kept = {k: v for k, v in stored.items() if not any(leaf in k for leaf in qk)}
    # every layer's q and k norms (StableLM: one per head, 4 query and 2 KV heads; Cohere: one tensor each)
    assert len(stored) - len(kept) == (12 if model_type == "stablelm" else 4)
    save_file(kept, weights, metadata={"format": "pt"})
    mismatch = [f for f in inspect(str(ckpt)).findings if f.code == "config-tensor-mismatch"]
    assert len(mismatch) == 1 and f"sets {flag}: true" in mismatch[0].message and mismatch[0].severity == "warning"


def test_a_spelling_in_a_model_section_is_named_with_its_section() -> None:
    # DBRX as transformers 5 saves it: attn_config.rope_theta (500000, which its rotary embedding never reads) beside
    # rope_parameters (10000, the base it computes): generate's reference_rope_base check covers the released layout.
    config = {"model_type": "dbrx", "d_model": 64, "n_heads": 4, "n_layers": 2,
              "attn_config": {"kv_n_heads": 2, "rope_theta": 5e5},
              "rope_parameters": {"rope_type": "default", "rope_theta": 1e4}}  # fmt: skip
    codes = _codes(config)
    assert codes["config-alias-conflict"] == [
        "attn_config.rope_theta = 500000.0 and rope_parameters.rope_theta spell one fact with different values; "
        "onboard reads rope_parameters.rope_theta"
    ]
    assert not codes.get("config-unknown-field"), codes


def test_a_huge_label_count_does_not_reach_transformers_config_class() -> None:
    # The config-only weight estimate builds transformers' config class, which makes a dict entry per label:
    # num_labels 2**70 hung inspect until it ran out of memory. Labels size no causal-LM weight and are left out.
    config = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256}  # fmt: skip
    plain = profile_from_parts(config, None)
    labelled = profile_from_parts({**config, "num_labels": 2**70, "id2label": {"0": "a"}}, None)
    assert plain.memory.weights_source == labelled.memory.weights_source == "estimated"
    assert labelled.memory.weights_bytes == plain.memory.weights_bytes > 0
