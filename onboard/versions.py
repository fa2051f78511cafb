"""Installed versions of the libraries that shape a result (goldens, stage cache keys), read from package
metadata, never by importing the library."""

from __future__ import annotations

import platform
from importlib import metadata

NUMERIC_LIBRARIES = ("onboard", "torch", "transformers", "tokenizers", "safetensors")
"""What decides a model's numbers: the weights' loader, the reference implementation, the tokenizer, the kernels."""
TOKENIZER_LIBRARIES = (
    "onboard", "tokenizers", "transformers", "jinja2", "sentencepiece", "tiktoken", "mistral-common", "gguf",
)  # fmt: skip
"""What decides a tokenizer's ids and a chat template's renders."""


def library_versions(names: tuple[str, ...] = NUMERIC_LIBRARIES, *, python: bool = True) -> dict[str, str]:
    """{name: version} of the installed ones among `names` (a missing library is left out), python's first."""
    out = {"python": platform.python_version()} if python else {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out
