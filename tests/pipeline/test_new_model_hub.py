# ruff: noqa: F811  (pytest fixtures imported from tests.hubserver are used as parameters)
"""`onboard new-model ORG/NAME` as CI runs it after a hub upload: through huggingface_hub and the loopback hub."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ci import missing
from tests.hubserver import HubServer, hub_env, hub_server  # noqa: F401  (fixtures)

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo-qwen3"


@pytest.mark.slow
def test_new_model_from_the_hub(hub_env: HubServer, tmp_path: Path) -> None:
    if not (DEMO / "model.safetensors").exists():
        missing("demo checkpoint not built (make demo / scripts/make_demo_checkpoint.py)")
    sha = hub_env.add_repo("acme/demo-qwen3", DEMO)
    r = subprocess.run([sys.executable, "-m", "onboard", "new-model", "acme/demo-qwen3", "--workspace",
                        str(tmp_path / "ws"), "--json"], capture_output=True, text=True, timeout=600)  # fmt: skip
    summary = json.loads(r.stdout)
    # The run is keyed by the resolved commit, every stage ran, and the decision names what is still open.
    assert summary["revision"] == sha and summary["slug"] == "acme__demo-qwen3"
    assert {k: v["outcome"] for k, v in summary["stages"].items()} == dict.fromkeys(
        ["inspect", "generate", "verify-tokenizer", "golden", "validate"], "ok"
    )
    assert r.returncode == 1 and {"licence_reviewed", "model_card_read"} <= set(summary["blocking"])
    assert (tmp_path / "ws" / "onboarding" / "acme__demo-qwen3" / sha / "report.html").is_file()
    assert (tmp_path / "ws" / "checklists" / "acme__demo-qwen3.md").is_file()
    # Promoted, the record pins the files the run downloaded, hashed from the local hub cache (no request): before,
    # a hub source's record named its files with no hash at all.
    for args in (["signoff", "acme__demo-qwen3", "licence_reviewed", "--by", "t"],
                 ["signoff", "acme__demo-qwen3", "model_card_read", "--by", "t"],
                 ["signoff", "acme__demo-qwen3", "tool_calls", "--by", "t", "--note", "served without tools"],
                 ["promote", "acme__demo-qwen3"]):  # fmt: skip
        done = subprocess.run([sys.executable, "-m", "onboard", *args, "--workspace", str(tmp_path / "ws")],
                              capture_output=True, text=True, timeout=600)  # fmt: skip
        assert done.returncode == 0, done.stderr
    record = json.loads((tmp_path / "ws" / "onboarding" / "acme__demo-qwen3" / sha / "promotion.json").read_text())
    files = {f["path"]: f["sha256"] for f in record["files"]}
    assert files["model.safetensors"] == hashlib.sha256((DEMO / "model.safetensors").read_bytes()).hexdigest()
    assert files["tokenizer_config.json"] and record["tokenizer_sha256"]
