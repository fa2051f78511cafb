"""The `onboard` command line: one thin module per stage, loaded only when its command runs.

Data (`--json`) goes to stdout, messages to stderr. Every `OnboardError` becomes `Error: …` / `Hint: …` and its
exit code (0 ok, 1 checks found errors, 2 unusable input or usage). `ONBOARD_DEBUG=1` re-raises with the traceback.
Nothing here imports torch, triton or transformers: `onboard --help` stays fast.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
from typing import Any

import click

from onboard import __version__
from onboard.collector import paused
from onboard.errors import OnboardError, is_native_panic

# command name -> (module, attribute). Imported lazily so `--help` never pays for a stage's imports.
COMMANDS: dict[str, tuple[str, str]] = {
    "inspect": ("onboard.cli.inspect_cmd", "inspect_command"),
    "verify-tokenizer": ("onboard.cli.verify_tokenizer_cmd", "verify_tokenizer_command"),
    "tokenize": ("onboard.cli.tokenize_cmd", "tokenize_command"),
    "render-template": ("onboard.cli.render_template_cmd", "render_template_command"),
    "generate": ("onboard.cli.generate_cmd", "generate_command"),
    "golden": ("onboard.cli.golden_cmd", "golden_group"),
    "validate": ("onboard.cli.validate_cmd", "validate_command"),
    "new-model": ("onboard.cli.new_model_cmd", "new_model_command"),
    "promote": ("onboard.cli.promote_cmd", "promote_command"),
    "registry": ("onboard.cli.registry_cmd", "registry_group"),
    "watch": ("onboard.cli.watch_cmd", "watch_command"),
    "webhook": ("onboard.cli.webhook_cmd", "webhook_group"),
    "queue": ("onboard.cli.queue_cmd", "queue_group"),
    "signoff": ("onboard.cli.signoff_cmd", "signoff_command"),
    "quantize-plan": ("onboard.cli.quantize_plan_cmd", "quantize_plan_command"),
    "convert": ("onboard.cli.convert_cmd", "convert_group"),
    "draft-check": ("onboard.cli.draft_check_cmd", "draft_check_command"),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        with paused():
            module = importlib.import_module(target[0])
        return getattr(module, target[1])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="onboard")
def cli() -> None:
    """Day-zero model onboarding: inspect, generate, verify, validate, promote.

    \b
    Examples:
      onboard inspect ./my-checkpoint --json
      onboard inspect Qwen/Qwen3-8B --target h100x2 --max-model-len 32768
    """


def main(argv: list[str] | None = None) -> None:
    try:
        _run(argv)
    finally:
        if argv is None and "triton" not in sys.modules:  # the process's own command line: it ends here
            # Frozen, what is still alive is not walked again by the collector at interpreter teardown. Not once
            # Triton is loaded: its nanobind objects left uncollected are reported at teardown as "leaked instances".
            gc.freeze()


def _run(argv: list[str] | None) -> None:
    debug = os.environ.get("ONBOARD_DEBUG") == "1"
    try:
        code = cli.main(args=argv, prog_name="onboard", standalone_mode=False)
    except OnboardError as exc:
        if debug:
            raise
        report_error(exc.message, exc.hint)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        say("Aborted.")
        sys.exit(2)
    except click.ClickException as exc:
        if debug:
            raise
        exc.show()
        sys.exit(2)
    except KeyboardInterrupt:
        say("Interrupted.")
        sys.exit(130)
    except BaseException as exc:  # never show a traceback to users unless asked (a Rust library's panic included)
        if debug or not (isinstance(exc, Exception) or is_native_panic(exc)):
            raise
        if isinstance(exc, OSError) and exc.filename:
            # A path the file system refused that no stage turned into an InputError: name it, it is not a bug.
            from onboard.fsutil import os_error

            error = os_error(exc, exc.filename, "use")
            report_error(error.message, error.hint)
            sys.exit(2)
        report_error(
            f"internal error: {type(exc).__name__}: {exc}",
            "this is a bug in onboard; rerun with ONBOARD_DEBUG=1 for the traceback and report it",
        )
        sys.exit(2)
    sys.exit(code if isinstance(code, int) else 0)


def report_error(message: str, hint: str | None = None) -> None:
    say(f"Error: {message}")
    if hint:
        say(f"Hint: {hint}")


def say(message: str = "") -> None:
    click.echo(message, err=True)


def emit_json(obj: Any) -> None:
    from onboard import serde

    click.echo(serde.to_json(obj))
