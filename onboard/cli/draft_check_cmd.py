"""`onboard draft-check`: is a speculative-decoding draft compatible with its target, and what would it buy?"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from onboard.cli import emit_json, say
from onboard.cli.options import FOLDER, SERVED_DTYPE_OPTION, FiniteFloatRange, option


@click.command("draft-check")
@click.argument("target")
@click.argument("draft")
@option("--k", "max_k", type=click.IntRange(1, 8), default=8, help="Measure draft windows k = 1..K.")
@option(
    "--temperature",
    type=FiniteFloatRange(min=0),
    default=1.0,
    help="Sampling acceptance sum(min(p, q)) at this temperature (0: greedy only).",
)
@option(
    "--golden",
    type=FOLDER,
    help="Golden folder of TARGET: its prompts and continuations are the trajectories (default: the prompt suite, "
    "continued greedily by TARGET).",
)
@option(
    "--max-new-tokens", type=click.IntRange(min=2), default=32, help="Tokens continued per prompt (without --golden)."
)
@SERVED_DTYPE_OPTION
@option(
    "--out",
    type=FOLDER,
    help="Folder for draft-check.json (default: draft-check/<slug>; onboarding/<slug>/<revision> puts it in the "
    "onboarding report).",
)
@option("--revision", help="Branch, tag or commit of a hub TARGET.")
@option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
def draft_check_command(
    target: str,
    draft: str,
    max_k: int,
    temperature: float,
    golden: Path | None,
    max_new_tokens: int,
    dtype: str,
    out: Path | None,
    revision: str | None,
    as_json: bool,
) -> None:
    """Check DRAFT (a checkpoint folder or hub repo, `ngram`, or `mtp`) as a speculative-decoding draft of TARGET.

    Compatibility: the same token ids on the verify-tokenizer corpus, the same special tokens and stop set, every
    draft id inside the target's embedding. Then acceptance along TARGET's greedy trajectories (mean accepted length
    per k, sum(min(p, q)) at --temperature), the expected speedup per k from the step costs measured on this
    machine, and the recommended k. Exit 0 when measured, 1 when the draft is incompatible or cannot be measured,
    2 on unusable input.

    \b
    Examples:
      onboard draft-check ./Qwen3-8B ./Qwen3-0.6B
      onboard draft-check ./my-model ngram --k 4 --temperature 0 --json
      onboard draft-check ./DeepSeek-V3 mtp --golden golden_outputs/deepseek-ai__DeepSeek-V3
    """
    from onboard.inspect_checkpoint.source import refuse_local_revision
    from onboard.speculative.check import Request, run

    refuse_local_revision(target, revision)
    request = Request(
        target, draft, tuple(range(1, max_k + 1)), temperature, dtype, golden, max_new_tokens, out, revision
    )
    result = run(request, say)
    _report(result)
    if as_json:
        emit_json(result)
    sys.exit(0 if result["passed"] else 1)


def _report(result: dict) -> None:  # type: ignore[type-arg]
    from onboard.speculative.acceptance import describe_k

    for finding in result["findings"]:
        say(f"{finding['severity']}: [{finding['code']}] {finding['message']}")
    greedy = result.get("greedy")
    if greedy:
        cost = result["cost"]
        say(
            f"cost: draft step {cost['draft_step_seconds'] * 1e3:.3g} ms, target step "
            f"{cost['target_step_seconds'] * 1e3:.3g} ms, c = {cost['ratio']:.3f}"
        )
        sampled = result.get("sampled") or {}
        by_k = {r["k"]: r for r in sampled.get("speedup", [])}
        head = f"{'k':>2} {'accepted/step':>13} {'speedup':>8}" + (
            f" {'T=' + str(sampled['temperature']):>8}" if by_k else ""
        )
        say(head)
        for row, speed in zip(greedy["by_k"], greedy["speedup"]):
            extra = f" {_times(by_k[row['k']]['measured'])}" if row["k"] in by_k else ""
            say(f"{row['k']:>2} {row['mean_accepted']:>13.2f} {speed['measured']:>7.2f}x{extra}")
        say(f"greedy alpha {greedy['alpha']:.3f}; recommended k: {describe_k(greedy['recommended_k'])}")
        if sampled:
            say(
                f"T={sampled['temperature']}: alpha sum(min(p, q)) {sampled['alpha']:.3f}; recommended k: "
                f"{describe_k(sampled['recommended_k'])}"
            )
    say(f"wrote {result['written']}")


def _times(value: float | None) -> str:
    return f"{value:>7.2f}x" if value is not None else f"{'—':>8}"
