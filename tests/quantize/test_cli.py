"""`onboard quantize-plan` as a command: exit codes 0/1/2, the --json contract, the files next to the plan, the
goldens' fingerprint check, and the plan's section in the onboarding report."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from onboard.cli import main

FAST = ["--formats", "q8_0,q4_k,int8", "--max-tokens", "48"]
JSON_KEYS = {"budget_kl", "predicted_kl", "measured_kl", "bytes", "bf16_bytes", "uniform_best", "units"}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.tiny.factory import make_tiny_checkpoint

    return make_tiny_checkpoint("qwen3", tmp_path_factory.mktemp("qp") / "qwen3")


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(["quantize-plan", *args])
    captured = capsys.readouterr()
    return int(exit_info.value.code or 0), captured.out, captured.err


def test_budget_plan_json_and_files(tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, str(tiny), "--budget-kl", "0.5", "--out", str(tmp_path), "--json", *FAST)
    assert code == 0, err
    summary = json.loads(out)
    assert set(summary) == JSON_KEYS and set(summary["uniform_best"]) == {"format", "bytes", "measured_kl"}
    assert summary["measured_kl"] <= 0.5 and summary["bytes"] < summary["bf16_bytes"]
    blocks = ("attn.qkv", "attn.o", "mlp.gate_up", "mlp.down")
    assert [u["unit"] for u in summary["units"]] == ["embedding", *(f"layer.{i}.{b}" for i in range(2) for b in blocks),
                                                     "head"]  # fmt: skip
    assert all(set(u) == {"unit", "layer", "kind", "format", "kl_alone"} for u in summary["units"])
    detail = json.loads((tmp_path / "quantize-plan.json").read_text())
    assert detail["stage"] == "quantize-plan" and detail["passed"] is True
    assert detail["runtime"].startswith("generated adapter")
    assert (tmp_path / "llama-quantize.sh").read_text().startswith("#!/bin/sh")
    assert "QuantizationModifier" in (tmp_path / "llmcompressor-recipe.yaml").read_text()
    assert "Error:" not in err and "wrote" in err


def test_without_llamacpps_quantizers_q3_k_is_left_out_and_said(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from onboard.quantize import ggml_native

    monkeypatch.setenv(ggml_native.DISABLE_ENV, "0")
    ggml_native._library.cache_clear()
    try:
        only, _, only_err = _run(capsys, str(tiny), "--budget-kl", "0.5", "--formats", "q3_k", "--out", str(tmp_path))
        code, _, err = _run(capsys, str(tiny), "--budget-kl", "0.5", "--out", str(tmp_path),
                            "--formats", "q8_0,q4_k,q3_k", "--max-tokens", "48")  # fmt: skip
    finally:
        ggml_native._library.cache_clear()
    assert only == 2 and "Error: --formats: none of q3_k can be simulated here" in only_err
    assert "Hint: needs q3_k and iq4_nl from llama.cpp's own quantizers" in only_err
    assert code == 0, err
    assert "not planned: q3_k: needs q3_k and iq4_nl from llama.cpp's own quantizers" in err
    detail = json.loads((tmp_path / "quantize-plan.json").read_text())
    assert detail["formats"] == ["q8_0", "q4_k"] and set(detail["formats_left_out"]) == {"q3_k"}
    assert {u["format"] for u in detail["units"]} <= {"q8_0", "q4_k", "bf16"}


def test_size_that_no_plan_fits_exits_1(tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, str(tiny), "--target-bytes", "10k", "--out", str(tmp_path), "--json", *FAST)
    assert code == 1
    assert "Error: no plan fits --target-bytes 10,000" in err and json.loads(out)["bytes"] > 10_000


@pytest.mark.parametrize(
    "args,message",
    [
        (["--budget-kl", "0.1", "--target-bytes", "1M"], "exactly one of --budget-kl and --target-bytes"),
        ([], "exactly one of --budget-kl and --target-bytes"),
        (["--budget-kl", "0.1", "--formats", "q2_k"], "Error: --formats: unknown format 'q2_k'"),
        (["--target-bytes", "lots"], "is not a size"),
    ],
)
def test_bad_input_exits_2(tiny: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    code, _, err = _run(capsys, str(tiny), *args)
    assert code == 2 and message in err


def test_missing_source_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, str(tmp_path / "nope"), "--budget-kl", "0.1")
    assert code == 2 and err.startswith("Error:") and "Traceback" not in err


def test_goldens_are_the_suite_and_must_be_of_this_checkpoint(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from onboard.validate_serving.golden import record

    golden = record(str(tiny), tmp_path / "golden", max_new_tokens=4, calibrate=(), max_long_tokens=32).folder
    code, _, err = _run(capsys, str(tiny), "--budget-kl", "0.5", "--golden", str(golden), "--out", str(tmp_path / "a"),
                        *FAST)  # fmt: skip
    assert code == 0, err
    detail = json.loads((tmp_path / "a" / "quantize-plan.json").read_text())
    assert detail["prompts"]["from"] == f"goldens {golden}"
    other = tmp_path / "other"
    shutil.copytree(tiny, other)
    config = json.loads((other / "config.json").read_text())
    config["rms_norm_eps"] = 1e-5
    (other / "config.json").write_text(json.dumps(config))
    code, _, err = _run(capsys, str(other), "--budget-kl", "0.5", "--golden", str(golden), *FAST)
    assert code == 2 and "goldens of another checkpoint" in err


def test_plan_section_in_the_onboarding_report(tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from onboard.promote.report import render_report
    from tests.promote.workspaces import SLUG, make_workspace

    rev = make_workspace(tmp_path)
    code, _, err = _run(capsys, str(tiny), "--budget-kl", "0.05", "--out", str(rev), *FAST)
    assert code == 0, err
    paths = render_report(SLUG, tmp_path)
    html = paths.html.read_text()
    assert 'id="plot-quantize-sensitivity"' in html and 'id="table-quantization-plan"' in html
    assert html.count("<polyline") >= 4  # q/k/v, o, gate/up and down series over the layers
    assert "| layer.1.mlp.down |" in paths.markdown.read_text()


def test_plan_measured_over_budget_exits_1(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Interactions the sweep cannot see: every whole-model measurement comes out at 1.0, whatever the plan.
    from onboard.quantize import plan
    from onboard.quantize.forward import Score

    monkeypatch.setattr(plan.Swept, "measure", lambda self, formats: Score(1.0, 0.5, 10))
    code, out, err = _run(capsys, str(tiny), "--budget-kl", "0.01", "--out", str(tmp_path), "--json", *FAST)
    assert code == 1 and "exceeds --budget-kl 1.000e-02 after 3 rounds" in err and "Hint:" in err
    detail = json.loads((tmp_path / "quantize-plan.json").read_text())
    assert detail["passed"] is False and len(detail["rounds"]) == 3 and json.loads(out)["measured_kl"] == 1.0
