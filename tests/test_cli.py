"""CLI contract: lazy imports, JSON on stdout, Error/Hint on stderr, exit codes 0/1/2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "examples" / "demo-qwen3"


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})}
    return subprocess.run([sys.executable, "-m", "onboard", *args], capture_output=True, text=True, env=full_env,
                          cwd=REPO, timeout=120)  # fmt: skip


def test_help_does_not_import_torch():
    code = ("import sys; from onboard.cli import cli; from click.testing import CliRunner; "
            "r = CliRunner().invoke(cli, ['--help']); assert r.exit_code == 0, r.output; "
            "print(sorted(m for m in ('torch', 'triton', 'transformers', 'tokenizers') if m in sys.modules))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_help_lists_inspect():
    r = run("--help")
    assert r.returncode == 0 and "inspect" in r.stdout


@pytest.fixture(scope="module")
def demo() -> Path:
    if not (DEMO / "model.safetensors").exists():
        subprocess.run([sys.executable, str(REPO / "scripts" / "make_demo_checkpoint.py")], check=True)
    return DEMO


def test_inspect_json_contract(demo):
    r = run("inspect", str(demo), "--json", "--target", "l4")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    for key in ("model_type", "architectures", "revision", "parameters", "features", "layers", "memory",
                "closest_family", "findings"):  # fmt: skip
        assert key in data
    assert set(data["parameters"]) >= {"total", "active", "by_dtype"}
    assert set(data["memory"]) >= {"weights_bytes", "kv_bytes_per_token"}
    assert data["model_type"] == "qwen3" and data["closest_family"] == "qwen3"
    assert data["memory"]["target"]["fits"] is True
    for f in data["findings"]:
        assert set(f) >= {"code", "severity", "message", "hint"}
    assert r.stderr == ""  # nothing but data on stdout, no messages when all is well


def test_local_inspect_loads_no_hub_client(demo):
    """A local folder never needs the hub: neither onboard's hub module nor huggingface_hub or httpx is imported."""
    code = ("import sys; from onboard.cli import main\ntry:\n    main(['inspect', sys.argv[1], '--json'])\n"
            "except SystemExit as e:\n    assert e.code == 0, e.code\n"
            "print(sorted(m for m in ('onboard.inspect_checkpoint.hub', 'huggingface_hub', 'httpx', 'numpy') "
            "if m in sys.modules), file=sys.stderr)")  # fmt: skip
    r = subprocess.run([sys.executable, "-c", code, str(demo)], capture_output=True, text=True, cwd=REPO, timeout=120,
                       env={**os.environ, "HF_HUB_OFFLINE": "1"})  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["model_type"] == "qwen3"
    assert r.stderr.strip() == "[]"


def test_main_called_with_arguments_leaves_the_collector_alone(demo, capsys):
    """main() freezes the collector only when it runs the process's own command line (it is about to exit); a
    caller passing argv (tests, scripts) keeps a collector that still collects everything."""
    import gc

    from onboard.cli import main

    frozen = gc.get_freeze_count()
    with pytest.raises(SystemExit) as info:
        main(["inspect", str(demo), "--json"])
    assert info.value.code == 0 and json.loads(capsys.readouterr().out)["model_type"] == "qwen3"
    assert gc.get_freeze_count() == frozen and gc.isenabled()


def test_human_summary_goes_to_stderr(demo):
    r = run("inspect", str(demo))
    assert r.returncode == 0 and r.stdout == ""
    assert "qwen3" in r.stderr and "parameters:" in r.stderr


def test_missing_folder_is_exit_2_with_hint(tmp_path):
    r = run("inspect", str(tmp_path / "nope"))
    assert r.returncode == 2
    assert r.stderr.startswith("Error: ") and "Hint: " in r.stderr and "Traceback" not in r.stderr


def test_malformed_config_names_the_file(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "llama",')
    r = run("inspect", str(tmp_path))
    assert r.returncode == 2 and "config.json" in r.stderr and "Traceback" not in r.stderr


def test_bad_option_values_are_usage_errors(demo):
    assert run("inspect", str(demo), "--target", "h9000").returncode == 2
    assert run("inspect", str(demo), "--kv-dtype", "int3").returncode == 2
    assert run("inspect", str(demo), "--max-model-len", "0").returncode == 2


def test_a_command_that_loads_triton_ends_with_its_own_output(demo, tmp_path):
    # The command's last line stays the last thing a user sees: no nanobind "leaked instances / types / functions"
    # report from libtriton at teardown (it came when cli.main froze the collector with Triton's objects alive).
    r = run("generate", str(demo), "--out", str(tmp_path / "gen"))
    assert r.returncode in (0, 1), r.stderr[-2000:]
    assert r.stderr.rstrip().splitlines()[-1].startswith("UNVERIFIED adapter_parity"), r.stderr[-2000:]
    assert "nanobind" not in r.stderr and "leaked" not in r.stderr
    # The same command with the collector frozen at the end regardless: this Triton does print the report.
    frozen = "import gc, sys\nfrom onboard import cli\ntry:\n    cli.main(sys.argv[1:])\nfinally:\n    gc.freeze()"
    bare = subprocess.run([sys.executable, "-c", frozen, "generate", str(demo), "--out", str(tmp_path / "bare")],
                          capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})  # fmt: skip
    if "nanobind" not in bare.stderr:
        pytest.skip("this Triton prints no teardown report: nothing to hide (a Triton that prints one checks this)")
    assert bare.returncode == r.returncode


def test_debug_env_shows_traceback(tmp_path):
    r = run("inspect", str(tmp_path / "nope"), env={"ONBOARD_DEBUG": "1"})
    assert r.returncode != 0 and "Traceback" in r.stderr
