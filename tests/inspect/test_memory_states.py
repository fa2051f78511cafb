"""Fixed recurrent state per sequence, from config.json, against the state transformers' model really keeps.

The tiny configs use widths equal to hidden_size, where reading a width from the wrong key gives the same answer;
these variants set every width and kernel apart, and tests/tiny/ground_truth.py weighs the real cache (measured once
and kept on disk: test_memory_tiny.measured).
"""

from __future__ import annotations

import json

import pytest

from tests.inspect.test_memory_tiny import measured, plan_of

VARIANTS = [
    ("recurrent_gemma", {"lru_width": 96, "conv1d_width": 3}),
    ("kimi_linear", {"linear_head_dim": 8, "linear_num_heads": 2, "linear_conv_kernel_dim": 3}),
    ("minimax", {"head_dim": 24, "num_attention_heads": 6}),  # lightning attention: head_dim² per head
    (
        "qwen3_next",
        {
            "linear_key_head_dim": 8,
            "linear_value_head_dim": 24,
            "linear_num_key_heads": 2,
            "linear_num_value_heads": 6,
            "linear_conv_kernel_dim": 3,
        },
    ),
    ("olmo_hybrid", {"linear_conv_kernel_dim": 3}),  # key heads of 16, value heads of 32
    ("mamba", {"state_size": 6, "conv_kernel": 3, "expand": 3}),
    ("mamba2", {"state_size": 6, "conv_kernel": 3, "n_groups": 4, "num_heads": 8, "head_dim": 24, "expand": 3}),
    # Jamba and Zamba size the mixer as mamba_expand x hidden_size; their intermediate_size is the MLP's.
    ("jamba", {"mamba_d_state": 6, "mamba_d_conv": 3, "mamba_expand": 3}),
    ("zamba", {"mamba_d_state": 6, "mamba_d_conv": 3, "mamba_expand": 3}),
    (
        "falcon_h1",
        {
            "mamba_d_ssm": 96,
            "mamba_n_heads": 6,
            "mamba_d_head": 16,
            "mamba_d_state": 6,
            "mamba_d_conv": 3,
            "mamba_n_groups": 2,
        },
    ),
    (
        "bamba",
        {
            "mamba_n_heads": 6,
            "mamba_d_head": 32,
            "mamba_d_state": 6,
            "mamba_d_conv": 3,
            "mamba_n_groups": 2,
            "mamba_expand": 3,
        },
    ),
    ("zamba2", {"mamba_d_state": 6, "mamba_d_conv": 3, "n_mamba_heads": 6, "mamba_ngroups": 2, "mamba_expand": 3}),
    ("nemotron_h", {"mamba_num_heads": 6, "mamba_head_dim": 12, "ssm_state_size": 6, "conv_kernel": 3, "n_groups": 2}),
    ("lfm2", {"conv_L_cache": 5}),
    # ZAYA's conv window over q and k, and Inkling's short convs, beside their KV.
    ("zaya", {"cca_time0": 3, "cca_time1": 4, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 12}),
    ("inkling_text", {"conv_kernel_size": 3, "swa_num_key_value_heads": 1, "swa_head_dim": 24}),
    ("inkling2_loop_text", {"loop_num_passes": 3}),  # each pass over the looped layers keeps its own states
    ("cpmant", {"prompt_length": 5}),  # a fixed K and V prefix of prompt_length tokens
]


@pytest.mark.parametrize(("model_type", "overrides"), VARIANTS, ids=[m for m, _ in VARIANTS])
def test_recurrent_state_matches_the_cache_transformers_keeps(model_type: str, overrides: dict) -> None:
    folder, truth = measured(model_type, overrides)
    state = truth["kv_cache"]["state_bytes_per_sequence"]
    assert state > 0
    planned = plan_of(folder, truth).memory.state_bytes_per_sequence
    assert planned == state and isinstance(planned, int)  # whole bytes, as the JSON profile reports them


def test_cpmant_without_prompt_tokens_keeps_no_prefix() -> None:
    folder, truth = measured("cpmant", {"prompt_length": 0})
    assert truth["kv_cache"]["state_bytes_per_sequence"] == 0 < truth["kv_cache"]["kv_bytes_per_token"]
    memory = plan_of(folder, truth).memory
    assert (memory.state_bytes_per_sequence, memory.kv_bytes_per_token) == (0, truth["kv_cache"]["kv_bytes_per_token"])


# The config fields that size a recurrent state. A config.json may leave one out (written by hand, or by a
# transformers release before the field existed): transformers then builds the model with its config class's default.
STATE_FIELDS = {
    "lru_width", "conv1d_width", "attention_hidden_size", "linear_head_dim", "linear_conv_kernel_dim",
    "short_conv_kernel_size", "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
    "linear_value_head_dim", "conv_kernel", "conv_L_cache", "mamba_d_state", "ssm_state_size", "state_size",
    "mamba_d_conv", "mamba_expand", "expand", "mamba_n_heads", "n_mamba_heads", "mamba_num_heads", "mamba_d_head",
    "mamba_head_dim", "mamba_n_groups", "mamba_ngroups", "n_groups", "mamba_d_ssm", "cca_time0", "cca_time1",
    "conv_kernel_size", "prompt_length", "loop_num_passes",
}  # fmt: skip
DEFAULTED = [
    "recurrent_gemma", "kimi_linear", "bailing_hybrid", "qwen3_next", "olmo_hybrid", "lara_mini", "mamba", "mamba2",
    "falcon_mamba", "jamba", "zamba", "zamba2", "falcon_h1", "bamba", "nemotron_h", "granitemoehybrid", "lfm2",
]  # fmt: skip
# ZAYA's conv window (cca_time0 at 2), Inkling's short convs (conv_kernel_size at 4), LFM3's conv (conv_L_cache at
# 7, LFM2's is 3): the plan sees these with their field left out too.
DEFAULTED += ["zaya", "inkling_text", "lfm3"]


@pytest.mark.parametrize("model_type", DEFAULTED)
def test_state_fields_left_out_take_the_defaults_transformers_fills(model_type: str) -> None:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    from tests.tiny.factory import make_tiny_config

    config = make_tiny_config(model_type).to_dict()
    defaults = CONFIG_MAPPING[model_type]().to_dict()
    left_out = sorted(k for k in STATE_FIELDS & set(config) if k in defaults and defaults[k] == config[k])
    assert left_out, f"{model_type}: no state field at its default, nothing left out"
    folder, truth = measured(model_type, left_out=tuple(left_out))
    assert truth["kv_cache"]["state_bytes_per_sequence"] > 0
    memory = plan_of(folder, truth).memory
    assert memory.state_bytes_per_sequence == truth["kv_cache"]["state_bytes_per_sequence"]
    assert memory.kv_bytes_per_token == truth["kv_cache"]["kv_bytes_per_token"]


# One field left out where its value is the class default but the tiny config sets it apart.
LEFT_OUT = [
    ("zaya", {"cca_time0": 3}, ("cca_time1",)),  # ZAYA's second conv window at its default, 2
    ("mamba", {"state_size": 16}, ("state_size",)),  # MambaConfig's state_size 16
    # MambaConfig derives intermediate_size = expand x hidden_size; a config.json may carry only expand, or neither.
    ("mamba", {"expand": 3}, ("intermediate_size",)),
    ("mamba", {"conv_kernel": 3}, ("intermediate_size", "expand")),
]


@pytest.mark.parametrize(("model_type", "overrides", "left_out"), LEFT_OUT, ids=[m for m, _, _ in LEFT_OUT])
def test_one_state_field_left_out(model_type: str, overrides: dict, left_out: tuple[str, ...]) -> None:
    folder, truth = measured(model_type, overrides, left_out=left_out)
    assert not set(left_out) & set(json.loads((folder / "config.json").read_text()))
    assert plan_of(folder, truth).memory.state_bytes_per_sequence == truth["kv_cache"]["state_bytes_per_sequence"] > 0


def test_bailing_conv_kernel_named_short_conv_kernel_size() -> None:
    """BailingHybridConfig takes its KDA conv width from short_conv_kernel_size (linear_conv_kernel_dim is derived):
    a config.json naming only short_conv_kernel_size sizes the conv windows by it."""
    folder, truth = measured("bailing_hybrid", {"short_conv_kernel_size": 3}, left_out=("linear_conv_kernel_dim",))
    assert "linear_conv_kernel_dim" not in (folder / "config.json").read_text()
    assert plan_of(folder, truth).memory.state_bytes_per_sequence == truth["kv_cache"]["state_bytes_per_sequence"] > 0


def test_inkling_loop_each_extra_pass_keeps_its_own_states() -> None:
    """Inkling2LoopModel.forward appends loop_layer_index_end - loop_layer_index_start cache layers per pass after
    the first (cache.layers += loop layers x (loop_num_passes - 1)). The tiny config: 4 sliding layers, layers 1-2
    looped, each keeping Inkling's short convs over k, v, the attention input and the MLP input:
    (2 x 2 KV heads x 16 + 2 x 64 hidden) x conv_kernel_size 4 = 768 elements. (tests/tiny's cache measurement
    folds the pass copies onto the model's layers and undercounts 2 passes, so this one is arithmetic.)"""
    from onboard.inspect_checkpoint import profile_from_parts
    from tests.tiny.factory import make_tiny_config

    for passes in (2, 3):
        config = make_tiny_config("inkling2_loop_text", {"loop_num_passes": passes}).to_dict()
        assert (config["loop_layer_index_start"], config["loop_layer_index_end"], config["conv_kernel_size"]) == (
            1,
            3,
            4,
        )
        memory = profile_from_parts(config, None, max_model_len=64, kv_dtype="float32").memory
        assert memory.state_bytes_per_sequence == (4 + 2 * (passes - 1)) * 768 * 4


def test_inkling_conv_kernel_named_sconv_kernel_size() -> None:
    """Inkling checkpoints name the conv width sconv_kernel_size (the config classes' attribute_map reads it as
    conv_kernel_size): a config.json naming only that sizes the short convs as the measured conv_kernel_size does."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    from onboard.inspect_checkpoint import profile_from_parts

    folder, truth = measured("inkling_text", {"conv_kernel_size": 3, "swa_num_key_value_heads": 1, "swa_head_dim": 24})
    config = json.loads((folder / "config.json").read_text())
    config["sconv_kernel_size"] = config.pop("conv_kernel_size")
    assert CONFIG_MAPPING["inkling_text"](**config).conv_kernel_size == 3
    kv = truth["kv_cache"]
    memory = profile_from_parts(config, None, kv_dtype="float32", max_model_len=kv["probe_tokens"][-1]).memory
    assert memory.state_bytes_per_sequence == kv["state_bytes_per_sequence"] > 0
