"""Serving engines started by onboard itself on loopback: llama.cpp (convert, quantize, serve) and vLLM's CPU build.
Light on import (no torch): the CLI imports from here at `--help` time."""
