"""`onboard inspect`: config + safetensors headers → ModelProfile (never the weights)."""

from __future__ import annotations

import click

from onboard.cli import emit_json, say
from onboard.cli.options import REVISION_OPTION, option
from onboard.errors import ChecksFailed, InputError
from onboard.findings import exit_code_for
from onboard.inspect_checkpoint import inspect  # at the top: this module is imported only when `inspect` runs


@click.command("inspect")
@click.argument("source")
@REVISION_OPTION
@option("--json", "as_json", is_flag=True, help="Print the ModelProfile as JSON on stdout.")
@option("--target", help="GPU[xN] to plan for, e.g. h100x8, h200, a100-80g x4.")
@option("--max-model-len", type=click.IntRange(min=1), help="Context length for the KV plan (default: model max).")
@option("--kv-dtype", help="KV-cache dtype: bf16, fp16, fp32, fp8 (default: the checkpoint dtype).")
def inspect_command(
    source: str,
    revision: str | None,
    as_json: bool,
    target: str | None,
    max_model_len: int | None,
    kv_dtype: str | None,
) -> None:
    """Profile a checkpoint from its config and safetensors headers.

    SOURCE is a local folder or a hub repo id (ORG/NAME). Exit 1 when checks find errors, 2 when the input is
    unusable (corrupt checkpoint, pickle-only weights, repository code only).

    \b
    Examples:
      onboard inspect ./checkpoint
      onboard inspect Qwen/Qwen3-8B --revision main --target h100x2 --max-model-len 32768 --json
    """

    profile = inspect(source, revision=revision, target=target, max_model_len=max_model_len, kv_dtype=kv_dtype)
    if as_json:
        emit_json(profile)
    else:
        from onboard.inspect_checkpoint.summary import render_summary  # the text view only

        say(render_summary(profile))
    code = exit_code_for(profile.findings)
    if code == 2:
        worst = next(f for f in profile.findings if f.severity == "fatal")
        raise InputError(f"{worst.message}" + (f" [{worst.file}]" if worst.file else ""), worst.hint)
    if code == 1:
        raise ChecksFailed(
            "inspection found errors (see findings)", "fix them or waive them before generating an adapter"
        )
