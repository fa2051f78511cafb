"""Real published configs (../shared/data, config + index only: no tensor names): the plan is the committed family's
adapter (composed from its reference profile), with no spurious stubs for keys the reference code ignores, stubs
exactly the quantized formats adapters cannot load, and each ModelArgs parses the real config.json."""

from __future__ import annotations

import importlib
import json

import pytest

from onboard.generate_adapter.plan import plan

EXPECTED = {
    "deepseek/deepseek-r1_hf-mirror": ("deepseek_v3", ["dequant_fp8"]),
    "gemma/gemma-2b-it_hf-mirror": ("gemma", []),
    "gemma/gemma-3-1b-it_user-upload": ("gemma3_text", []),
    "gpt-oss/gpt-oss-20b_hf-mirror": ("gpt_oss", ["dequant_mxfp4"]),
    "llama3/llama-3.2-3b-instruct_hf-mirror": ("llama", []),
    "mistral/mixtral-8x7b-v0.1_hf-mirror": ("mixtral", []),
    "phi/phi-3.5-mini-instruct_user-upload": ("phi3", []),
    "qwen/qwen3-1.7b_mlx-bf16-copy": ("qwen3", []),
    "smollm/smollm3-3b_hf-copy": ("smollm3", []),
}


@pytest.mark.parametrize("folder", sorted(EXPECTED))
def test_plan_and_args_on_real_configs(shared_data, folder: str) -> None:
    from onboard.inspect_checkpoint import inspect

    path = shared_data / folder
    if not (path / "config.json").is_file():
        pytest.skip(f"{folder} not in this copy of shared data")
    from onboard.generate_adapter.adapter_source import adapter_source
    from onboard.generate_adapter.families import ADAPTERS_DIR

    the_plan = plan(inspect(str(path)))
    family, stubs = EXPECTED[folder]
    assert (the_plan.model_type, [s.op for s in the_plan.stubs]) == (family, stubs)
    if not stubs:  # the committed adapter itself
        assert adapter_source(the_plan) == (ADAPTERS_DIR / f"{family}.py").read_text()
    adapter = importlib.import_module(f"onboard.adapters.{family}")
    args = adapter.ModelArgs.from_dict(json.loads((path / "config.json").read_text()))
    assert len(args.layer_types) == args.num_hidden_layers and args.head_dim > 0
