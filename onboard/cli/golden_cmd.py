"""`onboard golden record` (run the reference on the prompt suite, write goldens) and `golden diff` (compare two)."""

from __future__ import annotations

from pathlib import Path

import click

from onboard.cli import emit_json, say
from onboard.cli.options import MAX_LONG_TOKENS_OPTION, PATH, REVISION_OPTION, option, policy_from, remote_code_options
from onboard.errors import ChecksFailed, InputError


@click.group("golden")
def golden_group() -> None:
    """Golden outputs of the reference implementation (what `onboard validate` compares against)."""


@golden_group.command("record")
@click.argument("source")
@option("--out", type=PATH, help="Golden folder (default: golden_outputs/<org>__<name>).")
@REVISION_OPTION
@option("--max-new-tokens", type=click.IntRange(1, 4096), default=16)
@option("--top-k", type=click.IntRange(1, 20), default=10, help="Logprobs kept per position.")
@MAX_LONG_TOKENS_OPTION
@option(
    "--calibrate",
    default="float32,bfloat16,float16",
    help="Candidate dtypes to calibrate the noise model for (comma list; empty: none).",
)
@remote_code_options
@option("--json", "as_json", is_flag=True, help="Print the stage result as JSON on stdout.")
def record_command(
    source: str,
    out: Path | None,
    revision: str | None,
    max_new_tokens: int,
    top_k: int,
    max_long_tokens: int | None,
    calibrate: str,
    trust_remote_code: bool,
    unsafe_no_sandbox: bool,
    as_json: bool,
) -> None:
    """Record goldens for SOURCE (a checkpoint folder or hub repo id) with transformers, eager, float32.

    When the model_type exists only as the repository's code (auto_map), that code is the reference: it runs only
    with --trust-remote-code, in a sandboxed worker, and the manifest records its sha256.

    \b
    Examples:
      onboard golden record ./checkpoint
      onboard golden record Qwen/Qwen3-0.6B --out golden_outputs/Qwen__Qwen3-0.6B --max-long-tokens 2048
    """
    from onboard.checks import Check, stage_result
    from onboard.inspect_checkpoint.source import refuse_local_revision
    from onboard.validate_serving.golden import CALIBRATION, record

    refuse_local_revision(source, revision)
    dtypes = tuple(d.strip() for d in calibrate.split(",") if d.strip())
    unknown = [d for d in dtypes if d not in CALIBRATION]
    if unknown:
        raise InputError(f"--calibrate: unknown dtype(s) {unknown}", f"use some of {', '.join(CALIBRATION)}")
    policy = policy_from(trust_remote_code, unsafe_no_sandbox)
    golden = record(
        source,
        out,
        revision=revision,
        max_new_tokens=max_new_tokens,
        top_k=top_k,
        calibrate=dtypes,
        max_long_tokens=max_long_tokens,
        policy=policy,
    )
    prompts = golden.manifest["prompts"]
    recorded = Check("golden_recorded", True, detail=f"{len(prompts)} prompts")
    result = stage_result("golden", [recorded], folder=str(golden.folder), manifest=golden.manifest)
    if as_json:
        emit_json(result)
        return
    say(f"goldens written to {golden.folder} ({len(prompts)} prompts, top-{top_k}, {max_new_tokens} new tokens)")
    for p in prompts:
        say(
            f"  {p['name']:<14} {p['kind']:<13} {p['prompt_tokens']:>6} prompt + {p['generated_tokens']} generated tokens"
        )
    for dtype, noise in golden.manifest["noise"].items():
        state = "reference overflows" if noise["nonfinite"] else f"max logprob error {noise['max_logprob_error']:.3g}"
        say(f"  noise {dtype:<9} (float32 vs {noise['baseline']}): {state}")


@golden_group.command("diff")
@click.argument("old", type=PATH)
@click.argument("new", type=PATH)
@option("--json", "as_json", is_flag=True, help="Print the comparison as JSON on stdout.")
def diff_command(old: Path, new: Path, as_json: bool) -> None:
    """Compare two golden folders value by value: prompt ids, greedy tokens, logprobs within float32 noise.

    OLD is the goldens already recorded (e.g. of the promoted revision), NEW the ones to check against them. Revision,
    library versions and hardware are shown as context, never as differences. Exit 0 when they match, 1 when they
    differ, 2 when a folder is not a golden folder.

    \b
    Examples:
      onboard golden record Org/Model --revision NEWREV --out /tmp/goldens-new
      onboard golden diff golden_outputs/Org__Model /tmp/goldens-new
      onboard golden diff golden_outputs/Org__Model /tmp/goldens-new --json
    """
    from onboard.validate_serving.golden import read_golden
    from onboard.validate_serving.golden_diff import diff_goldens, summary

    diff = diff_goldens(read_golden(old), read_golden(new))
    if as_json:
        emit_json(diff.to_dict())
    else:
        say(summary(diff).rstrip())
    if not diff.passed:
        raise ChecksFailed(f"the goldens differ: {diff.detail}", "see docs/runbook.md (goldens_match_promoted)")
