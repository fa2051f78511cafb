"""`onboard generate`: ModelProfile -> adapter, kernel stubs for missing features, vLLM / SGLang launch scripts."""

from __future__ import annotations

import click

from onboard.cli import emit_json, say
from onboard.cli.options import option, policy_from, remote_code_options
from onboard.errors import ChecksFailed


@click.command("generate")
@click.argument("source")
@option("--out", "out_dir", type=click.Path(file_okay=False), help="Output folder (default: generated/<slug>).")
@option("--force", is_flag=True, help="Overwrite files that already exist in the output folder.")
@option("--parity", is_flag=True, help="Also run the adapter against the reference on SOURCE (local weights).")
@remote_code_options
@option("--json", "as_json", is_flag=True, help="Print the stage result as JSON on stdout.")
def generate_command(
    source: str,
    out_dir: str | None,
    force: bool,
    parity: bool,
    trust_remote_code: bool,
    unsafe_no_sandbox: bool,
    as_json: bool,
) -> None:
    """Generate adapters/<model_type>.py (blocks composed per family, weight map as data), kernel stubs and
    engine launch configs for a checkpoint.

    SOURCE is a local checkpoint folder, a hub repo id, or a ModelProfile JSON file from `onboard inspect --json`.
    Existing files are never overwritten without --force. Exit 1 when the adapter is not runnable yet (kernel
    stubs to implement) or parity fails, 2 when the input is unusable.

    \b
    Examples:
      onboard generate ./checkpoint --out build/my-model
      onboard inspect Org/Model --json > profile.json && onboard generate profile.json --force --json
    """
    from onboard.generate_adapter import default_out_dir, generate, load_profile
    from onboard.reference import rerun_command

    policy = policy_from(trust_remote_code, unsafe_no_sandbox)
    profile = load_profile(source)
    out = out_dir or str(default_out_dir(profile))
    rerun = rerun_command("generate", source, "--out", out, "--force", "--parity", policy=policy)
    result = generate(profile if not parity else source, out, force=force, parity=parity, policy=policy, rerun=rerun)
    if as_json:
        emit_json(result.to_dict())
    for rel in result.files:
        say(f"wrote {out}/{rel}")
    for check in result.checks:
        unverified = not check.passed and check.detail.startswith("unverified")
        say(f"{'ok ' if check.passed else 'UNVERIFIED' if unverified else 'FAIL'} {check.name}: {check.detail}")
    if not result.passed:
        failed = [c for c in result.checks if c.required and not c.passed]
        raise ChecksFailed(
            "; ".join(c.detail for c in failed),
            "implement the generated kernel stubs (kernels/<op>.py), then regenerate with --force"
            if any(c.name == "kernels_implemented" for c in failed)
            else "see the failed checks above",
        )
