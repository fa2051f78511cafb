"""Goldens: --record writes golden_outputs/<name>/tokenizer.json; a later run diffs and names the drift."""

from __future__ import annotations

import json
from pathlib import Path

from onboard.verify_tokenizer import verify_tokenizer
from tests.test_verify_tokenizer import CLEAN_TEMPLATE, make_repo


def test_record_then_compare_then_drift(shared_data: Path, tmp_path: Path) -> None:
    repo = make_repo(shared_data, tmp_path / "org__model")
    goldens = tmp_path / "golden_outputs"
    recorded = verify_tokenizer(str(repo), golden_dir=goldens, record=True)
    path = goldens / "org__model" / "tokenizer.json"
    assert recorded.golden.action == "recorded" and path.is_file()
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert {"fingerprint", "stop_ids", "renders", "corpus", "libraries", "revision"} <= set(doc)
    assert doc["libraries"]["tokenizers"] and doc["stop_ids"] == [2] and "system_multi_turn" in doc["renders"]

    again = verify_tokenizer(str(repo), golden_dir=goldens)
    assert again.golden.action == "compared" and again.golden.drift == 0 and again.exit_code == 0

    # Drift 1: the template changes (a new revision of tokenizer_config.json).
    config = json.loads((repo / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["chat_template"] = CLEAN_TEMPLATE.replace("[INST] ", "[INST]")
    (repo / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    # Drift 2: a merge disappears from tokenizer.json.
    tok = json.loads((repo / "tokenizer.json").read_text(encoding="utf-8"))
    tok["model"]["merges"] = [m for m in tok["model"]["merges"] if m not in (["▁", "t"], "▁ t")]
    (repo / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False), encoding="utf-8")

    drifted = verify_tokenizer(str(repo), golden_dir=goldens)
    codes = {f.code: f for f in drifted.findings}
    assert drifted.exit_code == 1 and drifted.golden.drift >= 2
    assert "golden-drift-render" in codes and "[INST]" in codes["golden-drift-render"].message
    ids = codes["golden-drift-ids"].message
    assert "first:" in ids and "golden [" in ids and "now [" in ids


def test_corrupt_golden_is_input_error(shared_data: Path, tmp_path: Path) -> None:
    import pytest

    from onboard.errors import InputError

    repo = make_repo(shared_data, tmp_path / "m")
    (tmp_path / "g" / "m").mkdir(parents=True)
    (tmp_path / "g" / "m" / "tokenizer.json").write_text("{", encoding="utf-8")
    with pytest.raises(InputError, match="golden"):
        verify_tokenizer(str(repo), golden_dir=tmp_path / "g")


def test_a_wrong_type_in_the_golden_names_its_json_path(tmp_path: Path) -> None:
    import pytest

    from onboard.errors import InputError
    from onboard.verify_tokenizer.goldens import read_golden

    doc = {"format": 1, "corpus": [{"text": "a", "ids": [1]}, {"text": "b", "ids": [2, "3"]}], "stop_ids": [0]}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match=r"tokenizer.json: malformed golden file: .* at `\$\.corpus\[1\]\.ids\[1\]`"):
        read_golden(path)
    doc["corpus"][1]["ids"] = [2, 3]
    path.write_text(json.dumps(doc))
    assert read_golden(path)["corpus"][1]["ids"] == [2, 3]
