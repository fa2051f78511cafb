"""The committed adapters/ are exactly what the generator renders now (like transformers' modular check), every
supported family has one, and a tiny checkpoint's own profile regenerates the committed file byte for byte."""

from __future__ import annotations

import pytest

from onboard.generate_adapter import render_files
from onboard.generate_adapter.adapter_source import REGENERATE_COMMAND
from onboard.generate_adapter.regenerate import ADAPTERS_DIR, expected_adapters
from tests.generate.conftest import REQUIRED_ARCHS


def test_committed_adapters_match_the_generator() -> None:
    expected = expected_adapters()
    stale = [name for name, text in expected.items() if (ADAPTERS_DIR / name).read_text() != text]
    missing = [name for name in expected if not (ADAPTERS_DIR / name).is_file()]
    assert not missing and not stale, (
        f"adapters/ is out of date with the generator (missing: {missing}, stale: {stale}); "
        f"regenerate with `{REGENERATE_COMMAND}` and commit the result"
    )
    extra = sorted(p.name for p in ADAPTERS_DIR.glob("*.py") if p.name != "__init__.py" and p.name not in expected)
    assert not extra, f"adapters/{extra} are not produced by the generator: delete them or add their ArchSpec"


@pytest.mark.parametrize("model_type", ["llama", "mixtral", "gemma3_text", "deepseek_v3", "gpt_oss", "smollm3"])
def test_profile_of_a_tiny_checkpoint_regenerates_the_committed_adapter(tiny, model_type: str) -> None:
    from onboard.inspect_checkpoint import inspect

    plan, files = render_files(inspect(str(tiny(model_type))))
    assert plan.stubs == (), f"spurious kernel stubs for a plain {model_type}: {plan.stubs}"
    assert files[f"adapters/{model_type}.py"] == (ADAPTERS_DIR / f"{model_type}.py").read_text()


def test_committed_adapters_import_as_package_modules() -> None:
    import importlib

    for model_type in REQUIRED_ARCHS:
        module = importlib.import_module(f"onboard.adapters.{model_type}")
        assert module.MODEL_TYPE == model_type and module.REQUIRED_KERNELS == ()
