"""`onboard new-model`: the whole chain, from a checkpoint to a promotion decision, report and checklist."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from onboard.cli import emit_json, say
from onboard.cli.options import MAX_LONG_TOKENS_OPTION, PATH, REVISION_OPTION, option, policy_from, remote_code_options
from onboard.reference import TRUST_FLAG
from onboard.validate_serving.candidates import DTYPES

if TYPE_CHECKING:
    from onboard.pipeline import PipelineResult


@click.command("new-model")
@click.argument("source")
@REVISION_OPTION
@option("--target", help="GPU[xN] to plan for, e.g. h100x8.")
@option("--endpoint", help="Validate this OpenAI-compatible server instead of the generated adapter.")
@option("--served-model", help="Model name on --endpoint.")
@option("--workspace", type=PATH, default=Path("."), help="Folder for onboarding/, golden_outputs/ and checklists/.")
@option("--resume/--no-resume", default=True, help="Reuse stage results whose inputs are unchanged.")
@option("--promote", "do_promote", is_flag=True, help="Promote when every required checklist item passes.")
@option(
    "--registry",
    type=click.Path(dir_okay=False),
    help="Registry database the checklist is ticked against "
    "and --promote records into (default: $ONBOARD_REGISTRY, else <workspace>/onboarding/registry.sqlite3).",
)
@MAX_LONG_TOKENS_OPTION
@option(
    "--dtype",
    type=click.Choice(DTYPES),
    help="The candidate's dtype, judged against the reference's own run in that dtype (default: the "
    "checkpoint's stored dtype with --endpoint, float32 for the in-process adapter).",
)
@remote_code_options
@option("--json", "as_json", is_flag=True, help="Print the run summary as JSON on stdout.")
def new_model_command(
    source: str,
    revision: str | None,
    target: str | None,
    endpoint: str | None,
    served_model: str | None,
    workspace: Path,
    resume: bool,
    do_promote: bool,
    registry: str | None,
    max_long_tokens: int | None,
    dtype: str | None,
    trust_remote_code: bool,
    unsafe_no_sandbox: bool,
    as_json: bool,
) -> None:
    """Onboard SOURCE: inspect, generate, verify the tokenizer, record goldens, validate, tick the checklist.

    Writes onboarding/<slug>/<revision>/ (stage results, report.md, report.html) and checklists/<slug>.md. Exit 0
    when the model is ready to promote (and, with --promote, promoted), 1 when required items are open, 2 when
    the checkpoint is unusable.

    A model whose architecture exists only as the repository's code (auto_map) is profiled and composed without
    running that code; parity, goldens and validation need it as the reference and run only with
    --trust-remote-code (in a sandboxed worker).

    \b
    Examples:
      onboard new-model examples/demo-qwen3
      onboard new-model Qwen/Qwen3-8B --target h100x2 --workspace /srv/onboard --promote --json
      onboard new-model Org/LongModel --max-long-tokens 32816   # cross a 32768-token original rope context
      onboard new-model Org/Model --endpoint http://gpu1:8000/v1 --dtype bfloat16
    """
    from onboard.errors import ChecksFailed, InputError
    from onboard.pipeline import run_new_model

    if served_model and not endpoint:
        raise InputError("--served-model needs --endpoint", "pass the server URL with --endpoint")
    policy = policy_from(trust_remote_code, unsafe_no_sandbox)
    result = run_new_model(
        source,
        revision=revision,
        target=target,
        endpoint=endpoint,
        served_model=served_model,
        workspace=workspace,
        resume=resume,
        promote=do_promote,
        policy=policy,
        max_long_tokens=max_long_tokens,
        dtype=dtype,
        registry=registry,
    )
    if as_json:
        emit_json(result.to_dict())
    say(f"report: {result.report.get('html')}")
    say(f"checklist: {result.checklist_md}")
    refused = [
        (n, s["detail"]) for n, s in result.stages.items() if s["outcome"] == "blocked" and TRUST_FLAG in s["detail"]
    ]
    if refused:  # the repository's code is the reference and was not allowed: say what would run it
        say(f"blocked ({', '.join(n for n, _ in refused)}): {refused[0][1]}")
    if result.unusable:
        raise InputError(
            f"the checkpoint is unusable: {_why_unusable(result)}",
            f"onboard inspect {source} shows what to fix (and how)",
        )
    if not result.ready:
        raise ChecksFailed(
            f"not ready to promote: open items {', '.join(result.blocking)}",
            f"see {result.checklist_md}; docs/runbook.md says what to do for each item",
        )
    say("ready to promote" + (" — promoted" if result.promoted else f": onboard promote {result.slug}"))


def _why_unusable(result: PipelineResult) -> str:
    """The inspect stage's fatal findings (e.g. `lfs-pointer: …`), from its result in the run folder."""
    from onboard.promote.stage_results import load_stage_results

    inspect_result = load_stage_results(result.run_dir).get("inspect")
    check = inspect_result.check("inspect_no_errors") if inspect_result else None
    detail = check.detail if check else None
    return detail or result.stages.get("inspect", {}).get("detail") or "see the inspect findings in the report"
