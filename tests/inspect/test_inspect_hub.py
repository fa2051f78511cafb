# ruff: noqa: F811  (pytest fixtures imported from tests.hubserver are used as parameters)
"""`onboard inspect ORG/NAME` through the real huggingface_hub client against the loopback hub server.

The whole command, in a subprocess: the hub profile equals the local one, carries the resolved commit sha, and no
weight bytes were transferred (headers only, by range requests).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from onboard.inspect_checkpoint import inspect
from tests.hubserver import HubServer, hub_env, hub_server  # noqa: F401  (fixtures)
from tests.tiny.factory import make_tiny_checkpoint


def test_inspect_hub_repo_equals_local(hub_env: HubServer, tmp_path: Path) -> None:
    ckpt = make_tiny_checkpoint("qwen3_moe", tmp_path / "qwen3_moe")
    sha = hub_env.add_repo("acme/tiny-moe", ckpt)
    weights = sum(p.stat().st_size for p in ckpt.glob("*.safetensors"))
    hub_env.reset_stats()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    r = subprocess.run([sys.executable, "-m", "onboard", "inspect", "acme/tiny-moe", "--json"], capture_output=True,
                       text=True, env=env, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr
    remote = json.loads(r.stdout)
    local = inspect(str(ckpt)).to_dict()
    assert remote["revision"] == sha
    for key in ("model_type", "dims", "layers", "features", "parameters", "memory", "moe", "closest_family"):
        assert remote[key] == local[key], key
    # Headers and small files only: far fewer bytes than the weights themselves.
    assert hub_env.stats.bytes_served < weights / 4, (hub_env.stats.bytes_served, weights)
    cached = list((tmp_path / "hf-cache").rglob("*.safetensors"))
    assert cached == [], f"weights were downloaded: {cached}"


def test_inspect_missing_hub_repo_is_exit_2(hub_env: HubServer) -> None:
    r = subprocess.run([sys.executable, "-m", "onboard", "inspect", "acme/does-not-exist"], capture_output=True,
                       text=True, env=dict(os.environ), timeout=120)  # fmt: skip
    assert r.returncode == 2
    assert "Error:" in r.stderr and "Hint:" in r.stderr and "Traceback" not in r.stderr
