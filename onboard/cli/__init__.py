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


def _available() -> dict[str, tuple[str, str]]:
    """Commands whose module exists in this build (stages land one by one)."""
    from importlib.util import find_spec

    return {name: target for name, target in COMMANDS.items() if find_spec(target[0]) is not None}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_available())

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        # Only this command's module is looked for (finding every command's module cost each run 2 ms).
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        try:
            with paused():
                module = importlib.import_module(target[0])
        except ModuleNotFoundError as exc:
            if exc.name != target[0]:  # the module exists, an import inside it failed: that is a bug to show
                raise
            return None
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
            # What is still alive is freed at shutdown; frozen, it is not walked by the collector passes of
            # interpreter teardown (12 ms of a 240 ms `onboard inspect` of a 93k-tensor checkpoint). Reference
            # counting still frees it. Callers passing argv (tests, scripts) keep their collector as it was.
            # Not once Triton is loaded: libtriton's nanobind objects left uncollected are reported at teardown as
            # ~30 lines of "leaked instances / types / functions" after the command's own output.
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
        click.echo("Aborted.", err=True)
        sys.exit(2)
    except click.ClickException as exc:
        if debug:
            raise
        exc.show()
        sys.exit(2)
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        sys.exit(130)
    except BaseException as exc:  # never show a traceback to users unless asked (a Rust library's panic included)
        if debug or not (isinstance(exc, Exception) or is_native_panic(exc)):
            raise
        if isinstance(exc, OSError) and exc.filename:
            # A path the file system refused (a name too long, a folder given for a file, …) that no stage turned
            # into an InputError: name it and say what to do rather than call it a bug. (Without a file name, a
            # refused connection say, it is not about a path.)
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
    click.echo(f"Error: {message}", err=True)
    if hint:
        click.echo(f"Hint: {hint}", err=True)
