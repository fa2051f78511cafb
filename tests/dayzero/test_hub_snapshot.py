# ruff: noqa: F811  (pytest fixtures imported from tests.hubserver are used as parameters)
"""A day-zero repo on the hub: the snapshot the reference stages download carries the repository's code (its
.py files), so --trust-remote-code has something to run and the sandbox something to hash."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from onboard.reference import REPO_CODE, reference_for
from tests.hubserver import HubServer, hub_env, hub_server  # noqa: F401  (fixtures)


def test_hub_snapshot_has_the_repository_code(dayzero, hub_env: HubServer) -> None:
    from onboard.sandbox import code_hash

    fixture = dayzero("llama")
    hub_env.add_repo("org/dayzero-llama", fixture.path)
    # A fresh process: huggingface_hub reads HF_ENDPOINT (set by hub_env) at import time.
    code = "from onboard.environment import resolve_local; print(resolve_local('org/dayzero-llama'))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    snapshot = Path(proc.stdout.strip())
    assert sorted(p.name for p in snapshot.glob("*.py")) == sorted(p.name for p in fixture.path.glob("*.py"))
    assert reference_for(snapshot).kind == REPO_CODE and code_hash(snapshot) == code_hash(fixture.path)
    assert fixture.imported() == []


def test_hub_tokenizer_files_include_its_code(dayzero, hub_env: HubServer, tmp_path: Path) -> None:
    import shutil

    from tests.dayzero.builder import ship_tokenizer_as_code

    root = tmp_path / "dayzero_tok"
    shutil.copytree(dayzero("llama").path, root)
    ship_tokenizer_as_code(root, tmp_path / "tokenizer.canary")
    hub_env.add_repo("org/dayzero-tok", root)
    code = ("from onboard.verify_tokenizer.repo import open_tokenizer_repo; "
            "print(open_tokenizer_repo('org/dayzero-tok').root)")  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (Path(proc.stdout.strip()) / "tokenization_dayzero.py").is_file()
    assert not (tmp_path / "tokenizer.canary").exists()
