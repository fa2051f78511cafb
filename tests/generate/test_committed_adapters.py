"""The committed adapters/ are exactly what composition renders now from the committed reference profiles (like
transformers' modular check), those profiles are what inspect reads from the families' tiny checkpoints today, and a
tiny checkpoint's own profile regenerates the committed file byte for byte."""

from __future__ import annotations

import pytest

from onboard.generate_adapter import render_files
from onboard.generate_adapter.adapter_source import REGENERATE_COMMAND
from onboard.generate_adapter.families import family_profile
from onboard.generate_adapter.regenerate import ADAPTERS_DIR, expected_adapters
from tests.generate.conftest import REQUIRED_ARCHS
from tests.generate.family_profiles import as_reference
from tests.generate.test_registry import WRITE


def test_committed_adapters_match_the_generator() -> None:
    expected = expected_adapters()
    missing = [name for name in expected if not (ADAPTERS_DIR / name).is_file()]
    stale = [
        name for name, text in expected.items() if name not in missing and (ADAPTERS_DIR / name).read_text() != text
    ]
    assert not missing and not stale, (
        f"adapters/ is out of date with the generator (missing: {missing}, stale: {stale}); "
        f"regenerate with `{REGENERATE_COMMAND}` and commit the result"
    )


@pytest.mark.parametrize("model_type", REQUIRED_ARCHS)
def test_reference_profile_is_the_tiny_checkpoints_and_regenerates_the_adapter(tiny, model_type: str) -> None:
    from onboard.inspect_checkpoint import inspect

    profile = as_reference(inspect(str(tiny(model_type))))
    assert profile == family_profile(model_type), f"adapters/profiles/{model_type}.json is stale: run `{WRITE}`"
    plan, files = render_files(profile)
    assert plan.stubs == (), f"spurious kernel stubs for a plain {model_type}: {plan.stubs}"
    assert files[f"adapters/{model_type}.py"] == (ADAPTERS_DIR / f"{model_type}.py").read_text()


def test_committed_adapters_import_as_package_modules() -> None:
    import importlib

    for model_type in REQUIRED_ARCHS:
        module = importlib.import_module(f"onboard.adapters.{model_type}")
        assert module.MODEL_TYPE == model_type and module.REQUIRED_KERNELS == ()
