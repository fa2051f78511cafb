"""What the worker sees (environment, terminal, threads), what crosses back (data only), and when it refuses."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from onboard.errors import SandboxError, SandboxUnavailable
from onboard.sandbox import code_hash, isolation, isolation_method, run_isolated
from onboard.sandbox.run import UnsafeSandboxWarning

PROBES = "onboard.sandbox.probes"


def test_worker_environment_is_fresh_offline_and_scrubbed(bubblewrap: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("HF_TOKEN", "hf_secret_token")
    monkeypatch.setenv("HUGGING_FACE_HUB_TOKEN", "hf_secret_token")
    monkeypatch.setenv("https_proxy", "http://proxy.invalid:3128")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    seen = run_isolated(f"{PROBES}:environment", method=bubblewrap, threads=3)
    env = seen["env"]
    assert "secret" not in repr(env) and "proxy" not in repr(env).lower()
    workdir = Path(env["HOME"]).parent
    assert workdir.name.startswith("onboard-sandbox-") and env["HOME"] != os.path.expanduser("~")
    for name in ("HF_HOME", "HF_HUB_CACHE", "HF_MODULES_CACHE", "TMPDIR", "TRANSFORMERS_CACHE"):
        assert Path(env[name]).is_relative_to(workdir), name
    assert env["HF_HUB_OFFLINE"] == "1" and env["TRANSFORMERS_OFFLINE"] == "1"
    assert env["OMP_NUM_THREADS"] == "3"
    assert seen["home_listing"] == []
    assert seen["stdin_isatty"] is False
    assert seen["controlling_tty"] != "opened"  # no terminal: nothing can prompt "run custom code? [y/N]"
    assert not workdir.exists()  # the parent removed the temp dir


def test_thread_count_follows_the_parent_torch(bubblewrap: str) -> None:
    import torch

    seen = run_isolated(f"{PROBES}:environment", method=bubblewrap)
    assert seen["env"]["OMP_NUM_THREADS"] == str(torch.get_num_threads())


def test_tensors_and_json_cross_both_ways(bubblewrap: str) -> None:
    import torch

    data = {
        "logits": torch.randn(2, 3, 5, dtype=torch.bfloat16),
        "ids": torch.arange(6).reshape(2, 3),
        "view": torch.arange(10.0)[::2],  # a strided view must cross as its values
        "nested": [{"x": torch.ones(1)}, 1.5, None, "text", True],
        "inf": math.inf,
    }
    back = run_isolated(f"{PROBES}:echo", data, method=bubblewrap)
    assert set(back) == set(data)
    for key in ("logits", "ids", "view"):
        assert back[key].dtype == data[key].dtype and torch.equal(back[key], data[key])
    assert torch.equal(back["nested"][0]["x"], torch.ones(1)) and back["nested"][1:] == [1.5, None, "text", True]
    assert back["inf"] == math.inf


def test_objects_do_not_cross(bubblewrap: str) -> None:
    with pytest.raises(SandboxError) as err:
        run_isolated(f"{PROBES}:unserializable", method=bubblewrap)
    assert "result['ids']: a builtins.set cannot cross the sandbox" in err.value.message
    with pytest.raises(TypeError, match=r"kwargs\['obj'\]: dict keys must be strings"):
        run_isolated(f"{PROBES}:echo", {"obj": {1: "non-string key"}}, method=bubblewrap)


def test_without_bubblewrap_it_is_refused_with_what_to_install(monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH without bwrap: how a machine without bubblewrap looks
    with pytest.raises(SandboxUnavailable) as err:
        run_isolated(f"{PROBES}:echo")
    assert "`bwrap` is not installed" in err.value.message
    assert "apt-get install bubblewrap" in (err.value.hint or "") and "--unsafe-no-sandbox" in (err.value.hint or "")
    with pytest.raises(SandboxUnavailable):  # forcing bubblewrap does not fall back either
        run_isolated(f"{PROBES}:echo", method=isolation.BUBBLEWRAP, unsafe_no_sandbox=True)
    assert isolation_method(unsafe_no_sandbox=True) == isolation.UNSAFE
    with pytest.warns(UnsafeSandboxWarning, match="WITHOUT isolation"):
        assert run_isolated(f"{PROBES}:echo", {"a": 1}, unsafe_no_sandbox=True) == {"a": 1}


def test_unsafe_flag_does_not_switch_off_working_isolation(bubblewrap: str) -> None:
    assert isolation_method(unsafe_no_sandbox=True) == bubblewrap


# ---- code_hash ------------------------------------------------------------------------------------------------


def _repo(root: Path) -> Path:
    (root / "sub").mkdir(parents=True)
    (root / "modeling_x.py").write_text("class X: pass\n")
    (root / "sub" / "helpers.py").write_text("A = 1\n")
    (root / "config.json").write_text("{}")
    return root


def test_code_hash_covers_python_files_names_and_bytes(tmp_path: Path) -> None:
    root = _repo(tmp_path / "repo")
    first = code_hash(root)
    assert len(first) == 64 and first == code_hash(root)
    (root / "config.json").write_text('{"changed": true}')  # not code
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "cached.py").write_text("junk")
    (root / ".git").mkdir()
    (root / ".git" / "hook.py").write_text("junk")
    assert code_hash(root) == first
    (root / "sub" / "helpers.py").write_text("A = 2\n")
    changed = code_hash(root)
    assert changed != first
    (root / "sub" / "helpers.py").rename(root / "sub" / "helpers2.py")
    assert code_hash(root) != changed


def test_code_hash_follows_hub_cache_symlinks(tmp_path: Path) -> None:
    plain = _repo(tmp_path / "plain")
    linked = tmp_path / "snapshot"
    linked.mkdir()
    (linked / "sub").mkdir()
    for rel in ("modeling_x.py", "sub/helpers.py", "config.json"):
        (linked / rel).symlink_to(plain / rel)
    assert code_hash(linked) == code_hash(plain)


def test_code_hash_of_a_missing_folder_is_an_input_error(tmp_path: Path) -> None:
    from onboard.errors import InputError

    with pytest.raises(InputError, match="not a folder"):
        code_hash(tmp_path / "nope")
