"""Strict loading: every runtime parameter filled and every checkpoint tensor consumed (or deliberately dropped),
shapes checked, safetensors only; plus the runtime surface other stages use (hidden states, hooks, masks)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from onboard.errors import InputError
from onboard.generate_adapter.loader import WeightsError
from onboard.generate_adapter.parity import load_adapter
from onboard.generate_adapter.regenerate import ADAPTERS_DIR


def _copy(tiny, tmp_path: Path, model_type: str = "qwen2") -> Path:
    ckpt = tmp_path / model_type
    shutil.copytree(tiny(model_type), ckpt)
    return ckpt


def _edit(ckpt: Path, fn) -> None:
    tensors = load_file(str(ckpt / "model.safetensors"))
    fn(tensors)
    save_file(tensors, str(ckpt / "model.safetensors"), metadata={"format": "pt"})


def _model(model_type: str):
    return load_adapter(ADAPTERS_DIR / f"{model_type}.py").Model


def test_missing_tensor_is_named(tiny, tmp_path: Path) -> None:
    ckpt = _copy(tiny, tmp_path)
    _edit(ckpt, lambda t: t.pop("model.layers.1.self_attn.k_proj.bias"))
    with pytest.raises(WeightsError, match=r"unloaded parameters: model\.layers\.1\.self_attn\.qkv_proj\.bias"):
        _model("qwen2").from_pretrained(ckpt)


def test_extra_tensor_is_named_and_inv_freq_is_dropped(tiny, tmp_path: Path) -> None:
    ckpt = _copy(tiny, tmp_path)
    _edit(ckpt, lambda t: t.update({"model.layers.0.self_attn.rotary_emb.inv_freq": torch.ones(8)}))
    _model("qwen2").from_pretrained(ckpt)  # a rotary cache is deliberately dropped
    _edit(ckpt, lambda t: t.update({"model.layers.0.mlp.mystery.weight": torch.ones(2, 2)}))
    with pytest.raises(WeightsError, match=r"unused checkpoint tensors: model\.layers\.0\.mlp\.mystery\.weight"):
        _model("qwen2").from_pretrained(ckpt)


def test_shape_mismatch_is_reported(tiny, tmp_path: Path) -> None:
    ckpt = _copy(tiny, tmp_path)
    _edit(ckpt, lambda t: t.update({"model.norm.weight": torch.ones(65)}))
    with pytest.raises(WeightsError, match=r"shape mismatch for model\.norm\.weight"):
        _model("qwen2").from_pretrained(ckpt)


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"hidden_size": -1}, r"cannot build a model from these values \(RuntimeError: "),
        (
            {"intermediate_size": 10**30},
            r"cannot build a model from these values \((RuntimeError|OverflowError|TypeError)",
        ),
        (
            {"intermediate_size": 10**6},
            r"describes a model of [\d,]+ parameters, but the checkpoint stores [\d,]+ elements",
        ),
    ],
)
def test_a_config_no_model_of_these_weights_has_is_refused_before_any_allocation(
    tiny, tmp_path: Path, changes: dict, says: str
) -> None:
    # Built on the meta device first: torch's errors for impossible dims become a ConfigError naming config.json,
    # and a config several times larger than the stored weights is refused before its memory is allocated (a
    # 10**6-wide MLP in the tiny qwen2 was allocated, 1.5 GB, then refused by the loader; 10**30 reached torch).
    from onboard.errors import ConfigError

    ckpt = _copy(tiny, tmp_path)
    config = json.loads((ckpt / "config.json").read_text())
    (ckpt / "config.json").write_text(json.dumps({**config, **changes}))
    with pytest.raises(ConfigError, match=r"config\.json: (the qwen2 adapter )?" + says) as info:
        _model("qwen2").from_pretrained(ckpt)
    assert "onboard inspect" in (info.value.hint or "")


def test_pickle_only_and_missing_config_are_input_errors(tiny, tmp_path: Path) -> None:
    ckpt = _copy(tiny, tmp_path)
    (ckpt / "model.safetensors").rename(ckpt / "pytorch_model.bin")
    with pytest.raises(InputError, match="no \\*.safetensors"):
        _model("qwen2").from_pretrained(ckpt)
    (ckpt / "config.json").unlink()
    with pytest.raises(InputError, match="config.json"):
        _model("qwen2").from_pretrained(ckpt)


def test_missing_required_config_field_is_named(tiny, tmp_path: Path) -> None:
    ckpt = _copy(tiny, tmp_path)
    config = json.loads((ckpt / "config.json").read_text())
    del config["hidden_size"]
    (ckpt / "config.json").write_text(json.dumps(config))
    with pytest.raises(InputError, match="config.json lacks hidden_size"):
        _model("qwen2").from_pretrained(ckpt)


def test_hidden_states_hooks_batch_and_mask(tiny) -> None:
    model = _model("gemma3_text").from_pretrained(tiny("gemma3_text"))
    ids = torch.randint(0, 1000, (3, 21), generator=torch.Generator().manual_seed(1))
    seen = []
    handles = [layer.register_forward_hook(lambda m, i, o: seen.append(o.shape)) for layer in model.model.layers]
    with torch.no_grad():
        logits, hidden = model(ids, return_hidden_states=True)
        single = model(ids[1:2])
        masked = model(ids, attention_mask=torch.ones_like(ids))
    for h in handles:
        h.remove()
    assert logits.shape == (3, 21, 1000) and logits.dtype == torch.float32
    assert len(hidden) == len(model.model.layers) + 1 and len(seen) == 3 * len(model.model.layers)
    torch.testing.assert_close(single[0], logits[1], atol=1e-5, rtol=1e-5)  # batch rows are independent
    torch.testing.assert_close(masked, logits)  # padded masks: tests/generate/test_padding_cache.py


def test_tied_checkpoint_with_saved_lm_head_loads(tiny, tmp_path: Path) -> None:
    ckpt = _copy(tiny, tmp_path, "gemma")
    _edit(ckpt, lambda t: t.update({"lm_head.weight": t["model.embed_tokens.weight"].clone()}))
    model = _model("gemma").from_pretrained(ckpt)
    assert model.lm_head.weight is model.model.embed_tokens.weight


def test_deepseek_mtp_layers_are_dropped_not_silently_accepted(tiny, tmp_path: Path) -> None:
    ckpt = _copy(tiny, tmp_path, "deepseek_v3")
    config = json.loads((ckpt / "config.json").read_text())
    n = config["num_hidden_layers"]
    config["num_nextn_predict_layers"] = 1
    (ckpt / "config.json").write_text(json.dumps(config))
    _edit(ckpt, lambda t: t.update({f"model.layers.{n}.eh_proj.weight": torch.ones(64, 128)}))
    _model("deepseek_v3").from_pretrained(ckpt)  # the MTP layer is deliberately dropped
    _edit(ckpt, lambda t: t.update({f"model.layers.{n + 1}.eh_proj.weight": torch.ones(64, 128)}))
    with pytest.raises(WeightsError, match=rf"unused checkpoint tensors: model\.layers\.{n + 1}\.eh_proj"):
        _model("deepseek_v3").from_pretrained(ckpt)
