"""The stage cache key changes with every input of the stage (issue 12 §4): library versions, the stage's own code,
the checkpoint, the parameters and the upstream keys; and it is stable when none of them changes."""

from __future__ import annotations

import pytest

from onboard import versions
from onboard.pipeline import cache
from onboard.pipeline.stages import STAGES


def _key(code: tuple[str, ...] = ("validate_serving",), **change: object) -> str:
    args = {"fingerprint": "abc", "params": {"dtype": "bfloat16"}, "upstream": ["k1"], **change}
    return cache.stage_key("validate", args["fingerprint"], args["params"], args["upstream"], code)


@pytest.mark.parametrize("library", versions.NUMERIC_LIBRARIES)
def test_a_library_upgrade_invalidates(monkeypatch, library):
    before = _key()
    assert _key() == before  # stable while nothing changes
    real = versions.metadata.version
    monkeypatch.setattr(versions.metadata, "version", lambda name: "999.0" if name == library else real(name))
    assert _key() != before


def test_an_edit_to_the_stage_code_invalidates(monkeypatch, tmp_path):
    stage_code = tmp_path / "my_stage"
    stage_code.mkdir()
    (stage_code / "run.py").write_text("THRESHOLD = 0.1\n")
    (stage_code / "notes.md").write_text("prose does not count\n")
    monkeypatch.setattr(cache, "ONBOARD_ROOT", tmp_path)
    cache.code_hash.cache_clear()
    before = _key(("my_stage",))
    (stage_code / "notes.md").write_text("edited prose\n")
    cache.code_hash.cache_clear()
    assert _key(("my_stage",)) == before
    (stage_code / "run.py").write_text("THRESHOLD = 0.2\n")
    cache.code_hash.cache_clear()
    assert _key(("my_stage",)) != before
    cache.code_hash.cache_clear()


def test_inputs_invalidate():
    before = _key()
    assert _key(fingerprint="abd") != before
    assert _key(params={"dtype": "float16"}) != before
    assert _key(upstream=["k2"]) != before
    assert _key(("verify_tokenizer",)) != before


def test_every_stage_names_code_that_exists():
    for stage in STAGES:
        assert "pipeline/stages.py" in stage.code and len(stage.code) > 1, stage.name
        for name in stage.code:
            assert len(cache.code_hash(cache.code_path(name))) == 64, (stage.name, name)
    with pytest.raises(ValueError, match="no code at"):
        cache.code_hash(cache.code_path("no_such_package"))
