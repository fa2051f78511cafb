"""One exception tree for the whole tool.

Stage code raises; only `onboard.cli.main` turns exceptions into `Error: …` / `Hint: …` and an exit code.
Exit codes: 0 ok, 1 checks found errors, 2 unusable input or usage.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class OnboardError(Exception):
    """Base class: a message for people and an optional hint saying what to do next."""

    exit_code = 2

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class InputError(OnboardError):
    """The input cannot be used (missing file, malformed JSON, bad option): exit 2."""


class ChecksFailed(OnboardError):
    """The input was usable but checks found errors: exit 1."""

    exit_code = 1


# INSPECT ERRORS


class SourceNotFound(InputError):
    """A local folder or hub repo that does not exist (or is not reachable)."""


class HubError(InputError):
    """The hub answered with an error we cannot work around (5xx after retries, auth, gated repo)."""


class CheckpointError(InputError):
    """A checkpoint file is malformed. `code` is the finding code (e.g. `header-past-eof`)."""

    def __init__(self, code: str, message: str, hint: str | None = None, file: str | None = None) -> None:
        super().__init__(message, hint)
        self.code = code
        self.file = file


class ConfigError(InputError):
    """config.json (or another JSON file of the repo) is missing or malformed."""


# SANDBOX ERRORS (repository code run in an isolated worker: onboard/sandbox/)


class SandboxUnavailable(InputError):
    """Isolation cannot be set up here (no bubblewrap, or namespaces are disabled): install it, or pass
    --unsafe-no-sandbox to run the repository's code without isolation (reported)."""


class SandboxError(InputError):
    """The sandboxed worker failed. `kind`: raised | memory | wall | cpu | file_size | crashed | refused | protocol."""

    def __init__(self, kind: str, message: str, hint: str | None = None, remote_traceback: str = "") -> None:
        super().__init__(message, hint)
        self.kind = kind
        self.remote_traceback = remote_traceback


# REFERENCE AND ARTIFACT ERRORS


class ReferenceUnusable(InputError):
    """The reference model is not sound after loading (onboard/reference_health.py): a parameter or buffer that is
    non-finite or uninitialised, or logits that are non-finite or change between loads or runs, and no repair made it
    sound. `cause` names the tensor and its module; nothing may be judged against this reference."""

    verdict = "reference-unusable"

    def __init__(self, cause: str, message: str, hint: str | None = None) -> None:
        super().__init__(message, hint)
        self.cause = cause


class NonFiniteValue(OnboardError):
    """A NaN or infinity about to be written into a JSON artifact: refused, naming the file and the field path."""

    def __init__(self, path: str, field: str, value: float, hint: str | None = None) -> None:
        super().__init__(
            f"{path}: refusing to write {value} at {field} (JSON artifacts hold finite numbers only)", hint
        )
        self.path = path
        self.field = field


# VALIDATE ERRORS


class UnknownDtype(InputError):
    """A dtype comparator.THRESHOLDS has no bounds for: refused, never judged with another dtype's bounds."""


def is_native_panic(exc: BaseException) -> bool:
    """pyo3's PanicException (tokenizers, safetensors on a malformed file): a BaseException, past `except Exception`."""
    return type(exc).__name__ == "PanicException" and type(exc).__module__ == "pyo3_runtime"


@contextmanager
def panics_as_errors() -> Iterator[None]:
    """A Rust library's panic inside the block re-raised as RuntimeError, for the caller's `except Exception`."""
    try:
        yield
    except BaseException as exc:
        if is_native_panic(exc):
            raise RuntimeError(f"the Rust library panicked ({str(exc).strip()[:200]})") from exc
        raise
