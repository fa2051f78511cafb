"""llama.cpp's converter and runtime across architectures: tiny llama, gemma2 (sliding window, soft-caps),
qwen3_moe and two multimodal wrappers (Qwen2.5-VL, Gemma 3), converted to F16, served, and validated (parity on every prompt position, greedy, in float16
tolerances) against goldens from transformers. llama and qwen3_moe carry the trained fixture's real BPE tokenizer
(4096 tokens, Qwen2's regex, named with --pre-tokenizer qwen2), and the GGUF's tokenizer is checked against it;
gemma2's converter reads only SentencePiece (tokenizer.model), so it carries Phi-3.5's real one (its tokenizer is
not compared: the gemma converter writes Gemma's no-prefix-space rule, which is not that tokenizer's). The trained fixture's tests (test_llamacpp_trained.py) carry the fidelity claims.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.validate.tiny_models import build

pytestmark = [pytest.mark.llamacpp, pytest.mark.usefixtures("_llamacpp_installed", "_one_torch_thread")]
PHI_TOKENIZER = "phi/phi-3.5-mini-instruct_user-upload"  # in the real test data (tests/ci.py, real-data)
TRAINED = Path(__file__).resolve().parents[1] / "fixtures" / "trained-qwen3"
TRAINED_TOKENIZER = ("vocab.json", "merges.txt", "tokenizer_config.json", "special_tokens_map.json",
                     "added_tokens.json", "generation_config.json")  # fmt: skip
SPM_KINDS = ("gemma2", "gemma3")  # llama.cpp's gemma converters read only SentencePiece (tokenizer.model)
SPM_FILES = ("tokenizer.model", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def _checkpoint(kind: str, out: Path, request: pytest.FixtureRequest) -> Path:
    if kind not in SPM_KINDS:  # the trained fixture's real 4096-token BPE: a small vocabulary keeps goldens cheap
        ids = {"vocab_size": 4096, "bos_token_id": 4032, "eos_token_id": 4034, "pad_token_id": 4032}
        path = build(kind, out, overrides=ids)
        for name in TRAINED_TOKENIZER:
            shutil.copy(TRAINED / name, path / name)
        return path
    path = build(
        kind, out, overrides={"vocab_size": 32064, "bos_token_id": 1, "eos_token_id": 32000, "pad_token_id": 0}
    )
    phi = request.getfixturevalue("shared_data") / PHI_TOKENIZER  # only these kinds need the real data
    for name in SPM_FILES:
        shutil.copy(phi / name, path / name)
    return path


# Multimodal wrappers (architecture, the tower's name prefix): llama.cpp's converter writes the language model (the
# vision tower would go to a separate --mmproj file), served and validated on text against transformers' wrapper.
WRAPPERS = {"qwen2_5_vl": ("Qwen2_5_VLForConditionalGeneration", "visual."),
            "gemma3": ("Gemma3ForConditionalGeneration", "vision_tower.")}  # fmt: skip
@pytest.mark.parametrize("kind", ["llama", "gemma2", "qwen3_moe", "qwen2_5_vl", "gemma3"])
def test_convert_serve_validate(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    from onboard.engines import llamacpp
    from onboard.engines.served import Served, gguf_tokenizer_checks
    from onboard.validate_serving.endpoint import EndpointCandidate
    from onboard.validate_serving.golden import record
    from onboard.validate_serving.run import validate

    model = _checkpoint(kind, tmp_path / kind, request)
    if kind in WRAPPERS:  # the wrapper itself: goldens from transformers' wrapper, its tower in the checkpoint
        import json

        from onboard.generate_adapter.loader import checkpoint_index

        architecture, tower = WRAPPERS[kind]
        assert json.loads((model / "config.json").read_text())["architectures"] == [architecture]
        assert any(name.startswith(tower) for name in checkpoint_index(model))
    golden = record(str(model), tmp_path / "golden", max_new_tokens=4, calibrate=("float16",), max_long_tokens=64)
    # The trained tokenizer's hash is unknown to llama.cpp (test_llamacpp_trained.py): its regex is Qwen2's.
    pre = None if kind in SPM_KINDS else "qwen2"
    converted = llamacpp.convert(model, tmp_path / f"{kind}-f16.gguf", "f16", pre_tokenizer=pre)
    assert converted.path is not None, converted.findings
    with llamacpp.serve(converted.path, kind, tmp_path / "server.log") as url:
        candidate = EndpointCandidate(url, kind, "float16", timeout_s=120)
        result = validate(golden, candidate, performance=False, only=frozenset(), checkpoint=model)
        tokenizer = gguf_tokenizer_checks(Served(url, kind, "float16", converted.path), model)
    checks = {c["name"]: c for c in result["checks"]}
    assert not checks["logit_parity"]["skipped"] and checks["greedy_parity"]["passed"]
    if kind not in SPM_KINDS:
        assert tokenizer[0].passed, tokenizer[0].detail
    assert result["passed"], [c for c in result["checks"] if c["required"] and not c["passed"]]


def test_a_layer_pattern_llamacpp_hard_codes_is_caught_past_the_window(tmp_path: Path, shared_data: Path) -> None:
    """llama.cpp's gemma3 takes its sliding / full layer pattern from the architecture (5 sliding, then 1 full), not
    from the GGUF. A Gemma 3 wrapper whose layer_types say [sliding, full] is another model there: its second layer
    slides. Validate catches it where the windows differ, past the sliding window (long_context_parity), and in
    greedy decoding."""
    from onboard.engines import llamacpp
    from onboard.validate_serving.endpoint import EndpointCandidate
    from onboard.validate_serving.golden import record
    from onboard.validate_serving.run import validate

    overrides = {"vocab_size": 32064, "bos_token_id": 1, "eos_token_id": 32000, "pad_token_id": 0,
                 "num_hidden_layers": 2, "layer_types": ["sliding_attention", "full_attention"]}  # fmt: skip
    model = build("gemma3", tmp_path / "gemma3", overrides=overrides)
    for name in SPM_FILES:
        shutil.copy(shared_data / PHI_TOKENIZER / name, model / name)
    golden = record(str(model), tmp_path / "golden", max_new_tokens=4, calibrate=("float16",), max_long_tokens=64)
    converted = llamacpp.convert(model, tmp_path / "gemma3-f16.gguf", "f16")
    assert converted.path is not None, converted.findings
    with llamacpp.serve(converted.path, "gemma3", tmp_path / "server.log") as url:
        candidate = EndpointCandidate(url, "gemma3", "float16", timeout_s=120)
        result = validate(golden, candidate, performance=False, only=frozenset(), checkpoint=model)
    checks = {c["name"]: c for c in result["checks"]}
    assert not result["passed"]
    assert not checks["long_context_parity"]["passed"] and "past sliding_window=16" in checks["long_context_parity"]["detail"]
