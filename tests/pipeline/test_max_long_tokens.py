"""new-model --max-long-tokens: the goldens' long prompt cap reaches the golden stage, its cache key and its reuse."""

from __future__ import annotations

import json

from onboard import pipeline
from onboard.pipeline import run_new_model
from tests.validate.tiny_models import ORIGINAL_MAX, build


def test_max_long_tokens_reaches_the_goldens_and_reruns_them(tmp_path, monkeypatch):
    ckpt = build("llama", tmp_path / "tiny-llama")  # original rope context 64 tokens
    monkeypatch.setattr(pipeline, "STAGES", tuple(s for s in pipeline.STAGES if s.name in ("inspect", "golden")))
    capped = run_new_model(str(ckpt), workspace=tmp_path / "ws", quiet=True, max_long_tokens=40)
    manifest = json.loads((tmp_path / "ws" / "golden_outputs" / "tiny-llama" / "MANIFEST.json").read_text())
    assert manifest["long_prompt"]["cap"] == 40
    assert manifest["long_prompt"]["uncrossed"] == {"original_max_position_embeddings": ORIGINAL_MAX + 48}
    raised = run_new_model(str(ckpt), workspace=tmp_path / "ws", quiet=True, max_long_tokens=ORIGINAL_MAX + 48)
    assert raised.run_dir == capped.run_dir and raised.stages["golden"]["outcome"] == "ok"  # not the cached result
    golden = json.loads((raised.run_dir / "golden.json").read_text())
    assert "re-recorded" in golden["checks"][0]["detail"]
    manifest = json.loads((tmp_path / "ws" / "golden_outputs" / "tiny-llama" / "MANIFEST.json").read_text())
    assert manifest["long_prompt"]["crossed"] == {"original_max_position_embeddings": ORIGINAL_MAX}
    assert not manifest["long_prompt"]["uncrossed"]
    again = run_new_model(str(ckpt), workspace=tmp_path / "ws", quiet=True, max_long_tokens=ORIGINAL_MAX + 48)
    assert again.stages["golden"]["outcome"] == "cached"
