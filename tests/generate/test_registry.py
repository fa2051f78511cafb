"""Registry coverage: every architecture issue 4 requires has an ArchSpec, a weight map, a committed adapter and a
parity test."""

from __future__ import annotations

from onboard.generate_adapter.archs import ARCHS
from onboard.generate_adapter.plan import supported_model_types
from onboard.generate_adapter.regenerate import ADAPTERS_DIR
from onboard.generate_adapter.weight_maps import CHECKPOINT_TENSORS, WEIGHT_MAPS
from tests.generate.conftest import REQUIRED_ARCHS


def test_every_required_arch_is_supported() -> None:
    missing = sorted(set(REQUIRED_ARCHS) - set(supported_model_types()))
    assert not missing, f"add an ArchSpec for {missing} in onboard/generate_adapter/archs.py"
    no_map = sorted(set(REQUIRED_ARCHS) - set(WEIGHT_MAPS))
    assert not no_map, f"add weight maps for {no_map} in onboard/generate_adapter/weight_maps.py"
    no_names = sorted(set(REQUIRED_ARCHS) - set(CHECKPOINT_TENSORS))
    assert not no_names, f"add known tensor names for {no_names} in onboard/generate_adapter/weight_maps.py"
    no_file = sorted(mt for mt in REQUIRED_ARCHS if not (ADAPTERS_DIR / f"{mt}.py").is_file())
    assert not no_file, f"adapters/{no_file}.py missing: run python -m onboard.generate_adapter.regenerate"


def test_every_supported_arch_has_a_parity_test() -> None:
    untested = sorted(set(ARCHS) - set(REQUIRED_ARCHS))
    assert not untested, (
        f"add {untested} to REQUIRED_ARCHS in tests/generate/conftest.py (parity is parametrized on it)"
    )
