"""A repository that ships its own modeling code runs in the worker, and its logits come back exactly.

The fixture is a tiny Llama re-shipped as remote code under a model_type transformers does not know
(`sbx_llama`, with `auto_map`): the only way to load it is to import the repository's files, which happens in the
worker alone. In process, the same weights load through transformers' own LlamaForCausalLM (no remote code), and
the two logits must be equal bit for bit: same dtype, same thread count, same machine.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from onboard.sandbox import run_isolated
from tests.tiny.factory import make_tiny_checkpoint

CONFIGURATION = """\
from transformers import LlamaConfig


class SbxLlamaConfig(LlamaConfig):
    model_type = "sbx_llama"
"""
MODELING = """\
from transformers import LlamaForCausalLM

from .configuration_sbx_llama import SbxLlamaConfig


class SbxLlamaForCausalLM(LlamaForCausalLM):
    config_class = SbxLlamaConfig
"""
IDS = [[1, 5, 9, 200, 17, 3, 44, 8], [2, 6, 7, 100, 18, 4, 45, 9]]


def remote_code_checkpoint(root: Path) -> Path:
    make_tiny_checkpoint("llama", root, seed=3)
    config = json.loads((root / "config.json").read_text())
    config.update(model_type="sbx_llama", architectures=["SbxLlamaForCausalLM"], auto_map={
        "AutoConfig": "configuration_sbx_llama.SbxLlamaConfig",
        "AutoModelForCausalLM": "modeling_sbx_llama.SbxLlamaForCausalLM",
    })  # fmt: skip
    (root / "config.json").write_text(json.dumps(config, indent=2))
    (root / "configuration_sbx_llama.py").write_text(CONFIGURATION)
    (root / "modeling_sbx_llama.py").write_text(MODELING)
    return root


def test_remote_code_logits_equal_in_process_transformers(bubblewrap: str, tmp_path: Path) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    checkpoint = remote_code_checkpoint(tmp_path / "repo")
    out = run_isolated("onboard.sandbox.probes:logits", {"checkpoint": str(checkpoint), "input_ids": IDS},
                       checkpoint=checkpoint, method=bubblewrap)  # fmt: skip
    assert out["threads"] == torch.get_num_threads()
    config = LlamaConfig.from_dict({k: v for k, v in json.loads((checkpoint / "config.json").read_text()).items()
                                    if k not in ("model_type", "auto_map", "architectures")})  # fmt: skip
    model = LlamaForCausalLM.from_pretrained(checkpoint, config=config, dtype=torch.float32,
                                             trust_remote_code=False).eval()  # fmt: skip
    with torch.inference_mode():
        expected = model(input_ids=torch.tensor(IDS)).logits
    assert out["logits"].dtype == torch.float32 and out["logits"].shape == expected.shape
    assert torch.equal(out["logits"], expected), float((out["logits"] - expected).abs().max())
    assert float(expected.abs().max()) > 0


def test_worker_only_function_refuses_to_run_in_process() -> None:
    from onboard.sandbox.probes import logits

    with pytest.raises(RuntimeError, match="run_isolated only"):
        logits(checkpoint="unused", input_ids=[[1]])


def test_a_modules_cache_on_the_parents_sys_path_does_not_reach_the_worker(
    bubblewrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After any remote-code load in the parent, transformers has appended its modules cache to sys.path. Passed on to
    the worker, it showed other repositories' code there and shadowed the worker's own `transformers_modules`, so
    this round trip failed with "No module named 'transformers_modules.repo'" whenever it ran after such a test."""
    import sys

    from onboard.sandbox.isolation import code_paths

    parent_cache = tmp_path / "parent-modules"
    (parent_cache / "transformers_modules").mkdir(parents=True)
    (parent_cache / "transformers_modules" / "__init__.py").write_text("")
    monkeypatch.setattr(sys, "path", [*sys.path, str(parent_cache)])
    assert str(parent_cache) not in code_paths(sys.path)
    test_remote_code_logits_equal_in_process_transformers(bubblewrap, tmp_path / "run")
