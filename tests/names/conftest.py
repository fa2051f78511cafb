"""The names tests build tiny checkpoints through tests/generate's session fixture (perturbed, built once)."""

from tests.generate.conftest import tiny  # noqa: F401 - the fixture, re-exported for this directory
