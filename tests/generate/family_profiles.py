"""Write the committed families' reference profiles (adapters/profiles/<model_type>.json) from their tiny
checkpoints, then regenerate the committed adapters from them:

    python -m tests.generate.family_profiles --write

A family's reference profile is its tiny checkpoint's (tests/tiny) with the knobs that switch on its optional code
paths (conftest.OVERRIDES), so its committed adapter composes those paths; the source is recorded as
`tiny:<model_type>` and the onboard version as `reference`, so the files do not depend on where or by which version
they were built.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import msgspec


def as_reference(profile):  # noqa: ANN001, ANN201 - ModelProfile -> ModelProfile
    """`profile` as the committed file holds it: where it was built and by which onboard version left out."""
    return msgspec.structs.replace(profile, source=f"tiny:{profile.model_type}", tool_version="reference")


def reference_profile(model_type: str, root: Path):  # noqa: ANN201 - a ModelProfile
    from onboard.inspect_checkpoint import inspect
    from tests.generate.conftest import OVERRIDES
    from tests.tiny.factory import make_tiny_checkpoint

    checkpoint = make_tiny_checkpoint(model_type, root / model_type, overrides=OVERRIDES.get(model_type))
    return as_reference(inspect(str(checkpoint)))


def write() -> None:
    from onboard.fsutil import atomic_write
    from onboard.generate_adapter.families import PROFILES_DIR
    from onboard.generate_adapter.regenerate import main as regenerate
    from tests.generate.conftest import REQUIRED_ARCHS

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    with tempfile.TemporaryDirectory() as tmp:
        for model_type in REQUIRED_ARCHS:
            atomic_write(PROFILES_DIR / f"{model_type}.json", reference_profile(model_type, Path(tmp)).to_json() + "\n")
    regenerate([])


if __name__ == "__main__":
    if "--write" not in sys.argv:
        sys.exit(__doc__)
    write()
