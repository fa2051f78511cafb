"""verify-tokenizer goldens: `--golden DIR` with nothing recorded is an error, and goldens are keyed by the repo id
whenever one is known, so a hub cache snapshot of a new revision is compared with the earlier one's golden."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from onboard.checkpoint_id import golden_key, repo_id_of
from onboard.verify_tokenizer import verify_tokenizer
from tests.test_verify_tokenizer import make_repo

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONWARNINGS": "ignore"}


def onboard(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "onboard", *args], capture_output=True, text=True, env=ENV, cwd=cwd,
                          timeout=300)  # fmt: skip


def test_golden_dir_with_nothing_recorded_is_an_error(shared_data: Path, tmp_path: Path) -> None:
    repo = make_repo(shared_data, tmp_path / "tiny-chat")
    (tmp_path / "goldens").mkdir()
    out = onboard("verify-tokenizer", str(repo), "--golden", str(tmp_path / "goldens"), cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert "Error: no tokenizer golden recorded for" in out.stderr and "tiny-chat" in out.stderr
    assert "Hint: record one first" in out.stderr and "--record" in out.stderr and "Traceback" not in out.stderr
    assert list((tmp_path / "goldens").iterdir()) == []  # nothing half-written
    verify_tokenizer(str(repo), golden_dir=tmp_path / "goldens", record=True)
    again = verify_tokenizer(str(repo), golden_dir=tmp_path / "goldens", golden_required=True)
    assert again.golden.action == "compared" and again.exit_code == 0


def test_a_hub_cache_snapshot_of_a_new_revision_finds_the_earlier_golden(shared_data: Path, tmp_path: Path) -> None:
    snapshots = tmp_path / "hub" / "models--acme--tiny-chat" / "snapshots"
    old = make_repo(shared_data, snapshots / ("a" * 40))
    assert repo_id_of(str(old)) == "acme/tiny-chat" and golden_key(str(old)) == "acme__tiny-chat"
    recorded = verify_tokenizer(str(old), golden_dir=tmp_path / "goldens", record=True)
    assert recorded.golden.path == str(tmp_path / "goldens" / "acme__tiny-chat" / "tokenizer.json")
    new = snapshots / ("b" * 40)
    shutil.copytree(old, new)
    again = verify_tokenizer(str(new), golden_dir=tmp_path / "goldens", golden_required=True)
    assert again.golden.action == "compared" and again.golden.path == recorded.golden.path and again.exit_code == 0


def test_name_and_name_or_path_key_a_plain_folder_by_the_repo_id(shared_data: Path, tmp_path: Path) -> None:
    goldens = tmp_path / "goldens"
    verify_tokenizer(str(make_repo(shared_data, tmp_path / "download")), golden_dir=goldens, record=True,
                     name="acme/tiny-chat")  # fmt: skip
    assert (goldens / "acme__tiny-chat" / "tokenizer.json").is_file()
    resaved = make_repo(shared_data, tmp_path / "resaved", config__json={"_name_or_path": "acme/tiny-chat"})
    report = verify_tokenizer(str(resaved), golden_dir=goldens, golden_required=True)
    assert report.golden.action == "compared" and report.golden.drift == 0
    local = make_repo(shared_data, tmp_path / "my-local-model", config__json={"_name_or_path": "/data/ckpt/step-100"})
    assert golden_key(str(local)) == "my-local-model"  # a path, not a repo id: the folder name, as before
    assert json.loads((local / "config.json").read_text())["_name_or_path"] == "/data/ckpt/step-100"
