# ruff: noqa: F811  (pytest fixtures imported from tests.hubserver are used as parameters)
"""Remote code is reported from `ast` and never executed, locally or from the hub."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from onboard.inspect_checkpoint.remote_code import classes_in, find_remote_code, remote_code_findings
from onboard.inspect_checkpoint.source import open_source
from tests import malformed as M
from tests.hubserver import HubServer, hub_env, hub_server  # noqa: F401  (fixtures)


def _markers(tmp_path: Path) -> list[Path]:
    return list(tmp_path.rglob(f"*{M.REMOTE_MARKER}*"))


def test_remote_code_is_parsed_not_run(tmp_path: Path) -> None:
    root = M.remote_code(tmp_path / "repo")
    src = open_source(str(root))
    rc = find_remote_code(src, src.read_json("config.json") or {})
    assert rc is not None
    assert rc.files == ("configuration_custom.py", "modeling_custom.py")
    assert set(rc.classes) == {
        "configuration_custom.CustomConfig", "modeling_custom.CustomLM", "modeling_custom.CustomAttention",
    }  # fmt: skip
    assert rc.auto_map["AutoModelForCausalLM"] == "modeling_custom.CustomLM"
    assert _markers(tmp_path) == []  # the module would have written the marker if imported
    assert "modeling_custom" not in sys.modules and "configuration_custom" not in sys.modules
    findings = remote_code_findings(rc, natively_supported=False)
    # Not fatal: the profile comes from config.json and headers; the reference stages need --trust-remote-code.
    assert [(f.code, f.severity) for f in findings] == [("remote-code-required", "warning")]
    assert "modeling_custom.py" in findings[0].message and "--trust-remote-code" in findings[0].hint


def test_natively_supported_remote_code_is_info(tmp_path: Path) -> None:
    root = M.remote_code(tmp_path / "repo")
    src = open_source(str(root))
    rc = find_remote_code(src, src.read_json("config.json") or {})
    assert [f.severity for f in remote_code_findings(rc, natively_supported=True)] == ["info"]


def test_tokenizer_auto_map_and_missing_class(tmp_path: Path) -> None:
    root = M.write_repo(tmp_path / "repo")
    (root / "tokenizer_config.json").write_text(
        json.dumps({"auto_map": {"AutoTokenizer": ["tokenization_x.SlowTok", "tokenization_x.FastTok"]}})
    )
    (root / "tokenization_x.py").write_text("class SlowTok:\n    pass\n")
    (root / "broken.py").write_text("def (:\n")  # unparsable: ignored, still listed
    src = open_source(str(root))
    rc = find_remote_code(src, {})
    assert rc is not None and rc.auto_map == {"AutoTokenizer": "tokenization_x.SlowTok, tokenization_x.FastTok"}
    assert rc.files == ("broken.py", "tokenization_x.py") and rc.classes == ("tokenization_x.SlowTok",)
    codes = [f.code for f in remote_code_findings(rc, natively_supported=True)]
    assert codes == ["remote-code", "remote-code-missing-class"]


def test_no_remote_code(tmp_path: Path) -> None:
    src = open_source(str(M.write_repo(tmp_path / "repo")))
    assert find_remote_code(src, {}) is None
    assert remote_code_findings(None, natively_supported=False) == []


def test_real_configs_with_auto_map(shared_data: Path) -> None:
    # DeepSeek-R1 and Phi-3 configs carry an auto_map (no .py files staged): reported, classes unknown.
    for folder in ("deepseek/deepseek-r1_hf-mirror", "phi/phi-3-mini-128k-instruct_user-upload"):
        src = open_source(str(shared_data / folder))
        rc = find_remote_code(src, src.read_json("config.json") or {})
        assert rc is not None and "AutoConfig" in rc.auto_map and rc.classes == ()


def test_classes_in() -> None:
    text = "import os\nclass A(B):\n    class Inner: pass\nif True:\n    class Hidden: pass\nclass C: ...\n"
    assert classes_in(text, "pkg.mod") == ["pkg.mod.A", "pkg.mod.C"]
    assert classes_in("\x00", "m") == [] and classes_in("class (", "m") == []


def test_remote_code_from_the_hub(hub_env: HubServer, tmp_path: Path) -> None:
    hub_env.add_repo("org/custom", M.remote_code(tmp_path / "repo"))
    src = open_source("org/custom")
    rc = find_remote_code(src, src.read_json("config.json") or {})
    assert rc is not None and "modeling_custom.CustomLM" in rc.classes
    assert _markers(tmp_path) == []
