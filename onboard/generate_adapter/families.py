"""The committed adapters: `adapters/<model_type>.py` is what composition renders from the family's reference
profile `adapters/profiles/<model_type>.json` (its tiny checkpoint's). Regenerate both with
`python -m tests.generate.family_profiles --write`, the adapters alone with `python -m onboard.generate_adapter.regenerate`.
"""

from __future__ import annotations

from pathlib import Path

from onboard.profile import ModelProfile

ADAPTERS_DIR = Path(__file__).resolve().parents[1] / "adapters"
PROFILES_DIR = ADAPTERS_DIR / "profiles"


def committed_families() -> tuple[str, ...]:
    """The model_types with a committed reference profile, sorted."""
    return tuple(sorted(p.stem for p in PROFILES_DIR.glob("*.json")))


def family_profile(model_type: str) -> ModelProfile | None:
    """The committed reference profile of `model_type` (None: not a committed family)."""
    path = PROFILES_DIR / f"{model_type}.json"
    return ModelProfile.from_json(path.read_text()) if path.is_file() else None
