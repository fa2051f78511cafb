"""Our `kernels/` folder must not shadow Hugging Face's `kernels` distribution.

transformers (5.25 and later) depends on the `kernels` package and imports it from `transformers.activations`. With the
repository root on sys.path (pytest, or any command run from a clone), a regular package `kernels/` (one with an
`__init__.py`) is found before site-packages and every modelling import fails with
"cannot import name 'CUDAProperties' from 'kernels'". As a namespace folder it yields to an installed regular package,
and stays importable as `onboard.kernels` through the symlink."""

from __future__ import annotations

import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_kernels_folder_is_a_namespace_not_a_regular_package() -> None:
    assert not (ROOT / "kernels" / "__init__.py").exists(), "kernels/__init__.py shadows the `kernels` distribution"
    assert (ROOT / "onboard" / "kernels" / "dispatch.py").is_file()


def test_modelling_imports_from_the_repository_root() -> None:
    """From the clone's root (cwd first on sys.path), transformers' activations import and our dispatch imports."""
    code = (
        "import importlib.util, transformers.activations, onboard.kernels.dispatch as d;"
        "spec = importlib.util.find_spec('kernels');"
        "print(d.__file__); print(spec.origin if spec else None)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    dispatch_file, kernels_origin = out.stdout.split()
    assert Path(dispatch_file).name == "dispatch.py"
    if find_spec("kernels") is not None and kernels_origin != "None":
        # An installed `kernels` distribution is what `import kernels` finds, not our folder.
        assert Path(kernels_origin).resolve().parent != (ROOT / "kernels").resolve()
