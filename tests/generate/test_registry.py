"""Registry coverage, as set differences over the composed path: every family issue 4 requires has a committed
reference profile (adapters/profiles/<model_type>.json), a committed adapter composed from it, and a parity test."""

from __future__ import annotations

from onboard.generate_adapter.families import ADAPTERS_DIR, PROFILES_DIR, committed_families
from tests.generate.conftest import REQUIRED_ARCHS

WRITE = "python -m tests.generate.family_profiles --write"


def test_every_required_arch_has_a_reference_profile() -> None:
    missing = sorted(set(REQUIRED_ARCHS) - set(committed_families()))
    assert not missing, f"add {[f'{PROFILES_DIR.name}/{m}.json' for m in missing]} under adapters/: run `{WRITE}`"


def test_every_reference_profile_has_a_parity_test() -> None:
    untested = sorted(set(committed_families()) - set(REQUIRED_ARCHS))
    assert not untested, (
        f"add {untested} to REQUIRED_ARCHS in tests/generate/conftest.py (parity is parametrized on it)"
    )


def test_every_committed_adapter_has_a_reference_profile() -> None:
    adapters = {p.stem for p in ADAPTERS_DIR.glob("*.py") if p.name != "__init__.py"}
    orphans = sorted(adapters - set(committed_families()))
    assert not orphans, (
        f"adapters/{orphans}.py have no reference profile: delete them or add the family and run `{WRITE}`"
    )
    missing = sorted(set(committed_families()) - adapters)
    assert not missing, f"adapters/{missing}.py missing: run python -m onboard.generate_adapter.regenerate"
