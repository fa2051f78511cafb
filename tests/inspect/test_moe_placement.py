"""MoE layer placement, router scoring and routed scaling read from config.json, against transformers' own models.

Which layers are MoE (issue 16, from inspect_params' surviving mutants): each key that places MoE layers is set to a
value where it binds (an end index before the last layer, a period that skips layers, a family default that keeps
the first layers dense), and inspect's answer from config.json alone (the raw dict a hub repo ships, and the dict
transformers saves) must be the layers the modelling code builds experts in, on the meta device. With the tensors
of that model as a checkpoint would store them, the total and active parameter counts must be the model's own.

The router rule (softmax or sigmoid) is checked by running each family's tiny router: the one that transformers
calls inside the router module is the truth, for config.json alone and with the checkpoint's tensors.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

import pytest

from onboard.inspect_checkpoint import profile_from_parts
from onboard.inspect_checkpoint.config_view import ConfigView
from onboard.inspect_checkpoint.moe_config import PLACEMENT_DEFAULTS, moe_layers_from_config
from tests.inspect.test_active_params import checkpoint_tensors, expected_active, meta_model
from tests.inspect.test_moe_layers_vs_modelling import layers_with_experts
from tests.tiny.configs import TINY
from tests.tiny.tiny_moe import MOE

N_LAYERS = 8
# Keys that place MoE layers in some transformers 5.25 family (left out of a config to get the family's default).
PLACEMENT_KEYS = (
    "first_k_dense_replace", "moe_layer_freq", "decoder_sparse_step", "mlp_only_layers", "num_dense_layers",
    "moe_layer_start_index", "moe_layer_end_index", "moe_layer_interval", "interleave_moe_layer_step", "moe_layers",
    "expert_layer_period", "expert_layer_offset", "mlp_layer_types", "num_dense_blocks", "dense_mlp_idx",
)  # fmt: skip
# Families with experts whose tiny config builds with 8 layers (MOE, plus hybrids and 5.25 families kept elsewhere).
FAMILIES = sorted(
    (set(MOE) - {"longcat_flash", "dbrx"})  # longcat: 2 sub-layers per layer; dbrx: experts nested in ffn_config
    | {"axk1", "axk2", "bailing_hybrid", "dots3_note_text", "hy_v4", "inkling_text", "kimi_linear", "laguna",
       "lfm2_moe", "minimax_m3_vl_text", "jamba", "mellum", "cohere2_moe", "qwen3_next", "nemotron_h", "granitemoehybrid"}
)  # fmt: skip


def tiny_kwargs(model_type: str, overrides: dict[str, Any] | None = None, *, strip: bool = False) -> dict[str, Any]:
    """The tiny config's keyword arguments with N_LAYERS layers (per-layer lists repeated to that length), without
    any placement key when `strip`, then `overrides` (None: left out): what a config.json holds, less model_type."""
    kwargs = dict(TINY[model_type])
    old = kwargs.get("num_hidden_layers")
    kwargs["num_hidden_layers"] = N_LAYERS
    for key, value in list(kwargs.items()):
        if isinstance(value, list) and len(value) == old and key != "mlp_layer_types":
            kwargs[key] = [value[i % old] for i in range(N_LAYERS)]
    kwargs.pop("mlp_layer_types", None)
    if strip:
        kwargs = {k: v for k, v in kwargs.items() if k not in PLACEMENT_KEYS}
    return {k: v for k, v in {**kwargs, **(overrides or {})}.items() if v is not None}


def build(model_type: str, kwargs: dict[str, Any]) -> tuple[Any, Any]:
    from transformers import AutoConfig

    config = AutoConfig.for_model(model_type, **kwargs)
    return config, meta_model(config)


def inspect_moe_layers(config: dict[str, Any]) -> list[int]:
    """The MoE layers of inspect's profile from config.json alone."""
    return [layer.index for layer in profile_from_parts(config, None).layers if layer.mlp == "moe"]


def test_every_family_default_is_checked_here() -> None:
    """Each PLACEMENT_DEFAULTS entry is compared with transformers below (Step-3.5 in its own test)."""
    assert set(PLACEMENT_DEFAULTS) <= {*FAMILIES, "step3p5"}


@pytest.mark.parametrize("model_type", FAMILIES)
def test_a_config_json_without_placement_keys_gets_the_family_default(model_type: str) -> None:
    """A hub config.json may leave every placement key out; transformers then applies its config class's default
    (DeepSeek-V3: 3 dense layers first, ERNIE-4.5: 1, Jamba: every second layer from 1, Flint: layers 0 and 1)."""
    kwargs = tiny_kwargs(model_type, strip=True)
    config, model = build(model_type, kwargs)
    expected = layers_with_experts(model)
    assert expected  # the premise: some layer has experts
    assert inspect_moe_layers({"model_type": model_type, **kwargs}) == expected
    assert inspect_moe_layers(config.to_dict()) == expected  # as transformers saves it
    if model_type in PLACEMENT_DEFAULTS:  # an entry is there because the family's default binds here
        assert expected != list(range(N_LAYERS))


# (model_type, config.json overrides, the MoE layers the modelling code builds with 8 layers)
BINDING = [
    # ERNIE-4.5: start index, inclusive end index (-1: the last layer), interval ending each period
    ("ernie4_5_moe", {"moe_layer_start_index": 0, "moe_layer_end_index": 0, "moe_layer_interval": 1}, [0]),
    ("ernie4_5_moe", {"moe_layer_start_index": 1, "moe_layer_end_index": 3, "moe_layer_interval": 1}, [1, 2, 3]),
    ("ernie4_5_moe", {"moe_layer_start_index": 2, "moe_layer_end_index": -1, "moe_layer_interval": 1},
     [2, 3, 4, 5, 6, 7]),
    ("ernie4_5_moe", {"moe_layer_start_index": 0, "moe_layer_end_index": 6, "moe_layer_interval": 2}, [1, 3, 5]),
    ("ernie4_5_moe", {"moe_layer_start_index": 0, "moe_layer_end_index": -2, "moe_layer_interval": 1}, []),
    # Llama 4: an explicit list wins over the interleave step; the step alone ends each period
    ("llama4_text", {"moe_layers": [0, 5], "interleave_moe_layer_step": 2}, [0, 5]),
    ("llama4_text", {"moe_layers": None, "interleave_moe_layer_step": 3}, [2, 5]),
    ("llama4_text", {"moe_layers": [1, 2, 5], "num_experts_per_tok": 1}, [1, 2, 5]),  # Scout/Maverick route top-1
    # Jamba: one MoE layer per period, at the offset
    ("jamba", {"expert_layer_period": 3, "expert_layer_offset": 1}, [1, 4, 7]),
    ("jamba", {"expert_layer_period": 4, "expert_layer_offset": 0}, [0, 4]),
    ("jamba", {"expert_layer_period": 3, "expert_layer_offset": 2}, [2, 5]),
    # DeepSeek style: dense-first count, and a frequency counted from layer 0
    ("deepseek_v3", {"first_k_dense_replace": 2}, [2, 3, 4, 5, 6, 7]),
    ("deepseek_v3", {"first_k_dense_replace": 0}, list(range(8))),
    ("axk1", {"moe_layer_freq": 3}, [3, 6]),
    ("axk2", {"first_k_dense_replace": 0, "moe_layer_freq": 2}, [0, 2, 4, 6]),
    # per-layer moe_layer_freq flags (dots.llm3 keeps its dense-first default, MiniMax-M3 has none)
    ("dots3_note_text", {"moe_layer_freq": [1, 1, 0, 1, 1, 0, 1, 0]}, [1, 3, 4, 6]),
    ("minimax_m3_vl_text", {"moe_layer_freq": [1, 0, 0, 1, 1, 0, 1, 0]}, [0, 3, 4, 6]),
    # Qwen style: a step ending each period, and layers forced dense
    ("qwen3_moe", {"decoder_sparse_step": 2, "mlp_only_layers": [3, 4]}, [1, 5, 7]),
    ("qwen2_moe", {"decoder_sparse_step": 3}, [2, 5]),
    ("flint", {"mlp_only_layers": []}, list(range(8))),
    ("flint", {"mlp_only_layers": [0, 5]}, [1, 2, 3, 4, 6, 7]),
    # other spellings of the dense-first count
    ("afmoe", {"num_dense_layers": 3}, [3, 4, 5, 6, 7]),
    ("lfm2_moe", {"num_dense_layers": 0}, list(range(8))),
    ("ergo", {"num_dense_blocks": 2}, [2, 3, 4, 5, 6, 7]),
    ("inkling_text", {"dense_mlp_idx": 2}, [2, 3, 4, 5, 6, 7]),
    # Nemotron-H: MoE and MLP are blocks of their own
    ("nemotron_h", {"layers_block_type": ["mamba", "moe", "attention", "mlp", "moe", "mamba", "moe", "mlp"]},
     [1, 4, 6]),
    ("nemotron_h", {"layers_block_type": None, "hybrid_override_pattern": "M-E*E-ME"}, [2, 4, 7]),  # original spelling
]  # fmt: skip


@pytest.mark.parametrize(("model_type", "overrides", "expected"), BINDING)
def test_binding_placement_keys_match_the_modelling_code(model_type: str, overrides: dict, expected: list) -> None:
    kwargs = tiny_kwargs(model_type, overrides, strip=True)
    config, model = build(model_type, kwargs)
    assert layers_with_experts(model) == expected  # the modelling code, as the test's premise
    raw = {"model_type": model_type, **kwargs}
    assert inspect_moe_layers(raw) == expected
    assert inspect_moe_layers(config.to_dict()) == expected
    if not expected:
        return
    # With the model's tensors as a checkpoint stores them: the same layers (dense, MoE, or no MLP: Nemotron-H's
    # Mamba blocks) and dense-first count as from config.json alone, and the model's own parameter counts.
    from_config = profile_from_parts(raw, None)
    with_tensors = profile_from_parts(config.to_dict(), checkpoint_tensors(model))
    assert [layer.mlp for layer in from_config.layers] == [layer.mlp for layer in with_tensors.layers]
    assert from_config.moe is not None and with_tensors.moe is not None
    assert from_config.moe.dense_first_layers == with_tensors.moe.dense_first_layers
    counts = with_tensors.parameters
    assert counts is not None
    assert counts.total == sum(p.numel() for p in model.parameters())
    assert counts.active == expected_active(model) < counts.total


def test_step_3_5_lists_its_moe_layers_as_text() -> None:
    """Step-3.5's hub config.json lists MoE layers as `moe_layers_enum` ("1,2,4" or a list); without it the first 3
    layers are dense. Its text model has no causal-LM class of its own: built directly, on the meta device."""
    import torch
    from transformers import AutoConfig
    from transformers.models.step3p7 import modeling_step3p7

    base = {"vocab_size": 128, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 6,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "moe_intermediate_size": 32,
            "n_routed_experts": 4, "num_experts_per_tok": 2, "share_expert_dim": 32}  # fmt: skip
    for extra, expected in (({}, [3, 4, 5]), ({"moe_layers_enum": "1,2,4"}, [1, 2, 4]),
                            ({"moe_layers_enum": [0, 5]}, [0, 5])):  # fmt: skip
        with torch.device("meta"):
            model = modeling_step3p7.Step3p7TextModel(AutoConfig.for_model("step3p5", **base, **extra))
        built = sorted(
            {int(n.split(".")[1]) for n, _ in model.named_modules() if re.fullmatch(r"layers\.\d+\.mlp\.experts", n)}
        )
        assert built == expected
        assert inspect_moe_layers({"model_type": "step3p5", **base, **extra}) == expected


def test_a_per_layer_frequency_list_is_not_a_type_error() -> None:
    """MiniMax-M3's `moe_layer_freq` is a list of per-layer flags: read as such, not reported as a wrong type."""
    view = ConfigView({"model_type": "minimax_m3_vl_text", "moe_layer_freq": [0, 1, 1]})
    assert moe_layers_from_config(view, 4) == {0: False, 1: True, 2: True, 3: False}
    assert view.type_errors == {}
    # Any other type is one (reported as a config-field-type warning), and ignored rather than crashing inspect.
    view = ConfigView({"model_type": "deepseek_v2", "moe_layer_freq": "2"})
    assert moe_layers_from_config(view, 3) == {0: True, 1: True, 2: True}
    assert view.type_errors == {"moe_layer_freq": "an integer"}


@contextlib.contextmanager
def router_calls(router: Any) -> Iterator[set[str]]:
    """The scoring functions (sigmoid, softmax) called while `router` runs."""
    import torch
    import torch.nn.functional as F

    seen: set[str] = set()
    inside: list[bool] = []
    hooks = [router.register_forward_pre_hook(lambda *_: inside.append(True)),
             router.register_forward_hook(lambda *_: inside.clear())]  # fmt: skip
    patched = [(owner, name, getattr(owner, name)) for owner in (torch, F, torch.Tensor)
               for name in ("sigmoid", "softmax", "logsigmoid") if hasattr(owner, name)]  # fmt: skip

    def counting(name: str, original: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            if inside:
                seen.add(name.replace("logsigmoid", "sigmoid"))
            return original(*args, **kwargs)

        return call

    for owner, name, original in patched:
        setattr(owner, name, counting(name, original))
    try:
        yield seen
    finally:
        for owner, name, original in patched:
            setattr(owner, name, original)
        for hook in hooks:
            hook.remove()


def router_scoring(config: Any) -> str:
    """Run one MoE block of the tiny model (CPU, random weights) and name the function its router scores with."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, trust_remote_code=False)
    modules = dict(model.named_modules())
    for name, module in modules.items():
        if re.search(r"layers\.\d+\.", name) and (
            type(module).__name__.endswith("Experts") or name.endswith(".experts")
        ):
            block = modules[name.rsplit(".", 1)[0]]
            router = next(c for n, c in block.named_children()
                          if n in ("gate", "router") or re.search(r"(Router|Gate|Gating)$", type(c).__name__))  # fmt: skip
            with router_calls(router) as seen, torch.no_grad():
                block(torch.randn(1, 5, config.get_text_config().hidden_size))
            assert len(seen) == 1, seen
            return seen.pop()
    raise AssertionError("no MoE block")


@pytest.mark.parametrize("model_type", FAMILIES)
def test_router_scoring_is_the_function_the_router_calls(model_type: str) -> None:
    config, model = build(model_type, tiny_kwargs(model_type))
    expected = router_scoring(config)
    from_config = profile_from_parts(config.to_dict(), None).moe
    with_tensors = profile_from_parts(config.to_dict(), checkpoint_tensors(model)).moe
    assert from_config is not None and with_tensors is not None
    assert (from_config.scoring, with_tensors.scoring) == (expected, expected)


def test_cohere2_moe_names_its_scoring_function() -> None:
    config, _ = build("cohere2_moe", tiny_kwargs("cohere2_moe", {"expert_selection_fn": "sigmoid"}))
    assert router_scoring(config) == "sigmoid"
    moe = profile_from_parts(config.to_dict(), None).moe
    assert moe is not None and moe.scoring == "sigmoid"


def test_an_unknown_family_with_a_correction_bias_scores_with_a_sigmoid() -> None:
    """A day-zero family onboard has no entry for: a stored e_score_correction_bias means a DeepSeek-V3-style sigmoid
    router (ERNIE-4.5's and LongCat's bias are the softmax exceptions, by name); none means softmax."""
    config, model = build("deepseek_v3", tiny_kwargs("deepseek_v3"))
    assert router_scoring(config) == "sigmoid"
    renamed = {k: v for k, v in config.to_dict().items() if k not in ("topk_method", "scoring_func")}
    renamed["model_type"] = "brand_new_moe"
    tensors = checkpoint_tensors(model)
    moe = profile_from_parts(renamed, tensors).moe
    assert moe is not None and (moe.scoring, moe.correction_bias) == ("sigmoid", True)
    plain = {n: t for n, t in tensors.items() if "e_score_correction_bias" not in n}
    moe = profile_from_parts(renamed, plain).moe
    assert moe is not None and (moe.scoring, moe.correction_bias) == ("softmax", False)


SCALING_ATTRIBUTES = ("routed_scaling_factor", "route_scale", "router_scaling_factor")


@pytest.mark.parametrize(
    ("model_type", "overrides"),
    [("ergo", {}), ("laguna", {"moe_routed_scaling_factor": 2.5}), ("hy_v3", {}), ("inkling_text", {}),
     ("afmoe", {"route_scale": 1.5}), ("deepseek_v3", {}), ("minicpm5_moe", {})],
)  # fmt: skip
def test_routed_scaling_factor_is_the_one_the_model_multiplies_by(model_type: str, overrides: dict) -> None:
    config, model = build(model_type, tiny_kwargs(model_type, overrides))
    values = {float(getattr(m, a)) for n, m in model.named_modules() if re.search(r"layers\.\d+\.", n)
              for a in SCALING_ATTRIBUTES if isinstance(getattr(m, a, None), (int, float))}  # fmt: skip
    assert len(values) == 1 and values != {1.0}, values  # the premise: one factor, and one that scales
    moe = profile_from_parts(config.to_dict(), None).moe
    assert moe is not None and moe.routed_scaling_factor == values.pop()
