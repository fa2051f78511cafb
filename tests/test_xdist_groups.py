"""The test scheduler's groups (tests/xdist_groups.py): every listed engine file exists and holds that engine's
marker, and node ids map to their file's group or their engine's."""

from __future__ import annotations

from pathlib import Path

from tests.xdist_groups import ENGINE_FILES, group_of

REPO = Path(__file__).resolve().parents[1]


def test_every_engine_file_exists_and_is_marked_for_its_engine() -> None:
    for file, engine in ENGINE_FILES.items():
        path = REPO / file
        assert path.is_file(), f"{file} is listed in tests/xdist_groups.py ENGINE_FILES but does not exist"
        assert f"pytest.mark.{engine}" in path.read_text(), f"{file} has no pytest.mark.{engine}"


def test_groups_are_the_file_or_the_engine() -> None:
    assert group_of("tests/test_fsutil.py::test_x[a@b]") == "tests/test_fsutil.py"
    assert group_of("tests/validate/test_vllm.py::test_vllm_matches_goldens[llama]") == "engine-vllm"
    assert group_of("tests/speculative/test_vllm_speculative.py::test_y") == "engine-vllm"
    assert group_of("tests/engines/test_convert_inputs.py::test_z") == "engine-llamacpp"
