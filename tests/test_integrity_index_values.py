"""An index whose weight_map values are not all file names is one `index-invalid` finding, whatever the values are
(integrity checks the distinct values, ~100 shards, rather than each of 100k+ tensors)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from onboard.inspect_checkpoint.integrity import check_integrity
from onboard.inspect_checkpoint.source import open_source
from tests import malformed as M


@pytest.mark.parametrize("bad", [["a", "list"], {"an": "object"}, 3, None, True])
def test_a_value_that_is_not_a_file_name_invalidates_the_index(tmp_path: Path, bad: object) -> None:
    root = M.valid(tmp_path / "r")
    index = json.loads((root / "model.safetensors.index.json").read_text())
    last = list(index["weight_map"])[-1]
    index["weight_map"][last] = bad
    (root / "model.safetensors.index.json").write_text(json.dumps(index))
    src = open_source(str(root))
    findings = check_integrity(src, src.read_headers(src.safetensors_files()))
    assert [(f.code, f.severity) for f in findings] == [("index-invalid", "fatal")]


def test_valid_index_has_no_findings(tmp_path: Path) -> None:
    src = open_source(str(M.valid(tmp_path / "r")))
    assert check_integrity(src, src.read_headers(src.safetensors_files())) == []
