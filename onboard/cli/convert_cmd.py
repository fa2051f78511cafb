"""`onboard convert gguf`: llama.cpp's own converter, then its quantizer with a quantize-plan's per-tensor types."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from onboard.cli import emit_json, say
from onboard.cli.options import PATH, option
from onboard.engines.llamacpp import CONVERTER_TYPES, QUANTIZER_TYPES


@click.group("convert")
def convert_group() -> None:
    """Convert a checkpoint for another engine."""


@convert_group.command("gguf")
@click.argument("source")
@option(
    "--type",
    "outtype",
    type=click.Choice(CONVERTER_TYPES + QUANTIZER_TYPES),
    help="GGUF file type (llama.cpp's names; default f16). With --plan: the base type, quantized (default "
    "q8_0); the plan sets every unit's type and the GGUF is checked to store them.",
)
@option("--plan", "plan_file", type=PATH, help="quantize-plan.json: per-tensor types for llama.cpp's quantizer.")
@option("--out", type=PATH, help="GGUF path (default: onboarding/<slug>/<name>-<TYPE>.gguf).")
@option(
    "--pre-tokenizer",
    help="llama.cpp pre-tokenizer name to write when the converter does not know the tokenizer's hash (the fix "
    "gguf-unknown-pre-tokenizer names; validate --engine llama.cpp checks it).",
)
@option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
def convert_gguf_command(
    source: str, outtype: str | None, plan_file: Path | None, out: Path | None, pre_tokenizer: str | None, as_json: bool
) -> None:
    """Convert the checkpoint folder SOURCE to GGUF with llama.cpp's converter (and quantizer).

    Needs .venv-llamacpp (scripts/install_llama_cpp.sh). The converter's refusals (an unknown pre-tokenizer, an
    unsupported architecture) are findings with the fix, exit 2. The GGUF appears at its path only when complete.

    \b
    Examples:
      onboard convert gguf ./checkpoint --type f16
      onboard convert gguf ./checkpoint --type q8_0 --plan onboarding/checkpoint/quantize-plan.json
    """
    from onboard.engines.convert import convert_gguf

    result, code = convert_gguf(source, outtype, plan_file, out, pre_tokenizer)
    if as_json:
        emit_json(result)
    for f in result["findings"]:
        say(f"{f['severity']}: {f['code']}: {f['message']}")
        if f.get("hint"):
            say(f"  fix: {f['hint']}")
    if result["gguf"]:
        say(
            f"written: {result['gguf']} ({result['bytes']} bytes, {result['file_type']}"
            f"{', ' + str(len(result['tensor_types'])) + ' tensor-type overrides' if result['tensor_types'] else ''})"
        )
    if code:
        sys.exit(code)
