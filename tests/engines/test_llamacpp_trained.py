"""llama.cpp for real on the trained tiny Qwen3 (tests/fixtures/trained-qwen3: peaked, not near-uniform outputs):
llama.cpp's converter, quantizer and runtime through `onboard convert gguf` and `onboard validate --engine llama.cpp`.

- Its own BPE tokenizer has a pre-tokenizer hash llama.cpp does not know: the refusal is a finding with the chkhsh.
- With the fix applied (--pre-tokenizer qwen2), F16 passes the usual parity checks (float16 tolerances) and the
  GGUF tokenizer check; prefill and decode land in validation.json. The wrong fix (--pre-tokenizer gpt-2: another
  regex) is a gguf-tokenizer-drift.
- Q8_0 passes a 0.002 KL budget (measured reported); the same measurement fails a budget below it.
- A quantize-plan at that budget converts with its per-tensor types (under Q8_0 when --type is left out), serves,
  and meets its own budget; a GGUF whose types are not the plan's (llama.cpp skipping overrides) is refused.
- A GGUF whose rope_freq_base was edited with the gguf package fails logit_parity.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from onboard.cli import main

pytestmark = [pytest.mark.llamacpp, pytest.mark.usefixtures("_llamacpp_installed", "_one_torch_thread")]
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "trained-qwen3"


def onboard(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    out = capsys.readouterr()
    return int(exit_info.value.code or 0), out.out, out.err


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The fixture (corpus left out), its goldens (float16 calibrated) and its F16 and Q8_0 GGUFs."""
    from onboard.engines.convert import convert_gguf
    from onboard.validate_serving.golden import record

    root = tmp_path_factory.mktemp("llamacpp")
    model = root / "trained-qwen3"
    shutil.copytree(FIXTURE, model, ignore=shutil.ignore_patterns("corpus.txt.gz"))
    record(str(model), root / "golden", max_new_tokens=4, calibrate=("float16",), max_long_tokens=96)
    out = {"model": model, "golden": root / "golden"}
    for kind in ("f16", "q8_0"):
        result, code = convert_gguf(str(model), kind, None, root / f"model-{kind}.gguf", "qwen2")
        assert code == 0 and result["gguf"], result["findings"]
        out[kind] = Path(result["gguf"])
    return out


def test_unknown_pre_tokenizer_is_a_finding_with_chkhsh(work, capsys, tmp_path: Path) -> None:
    from onboard.verify_tokenizer.fingerprint import fingerprint
    from onboard.verify_tokenizer.subject import load_subject

    target = tmp_path / "refused.gguf"
    code, out, err = onboard(capsys, "convert", "gguf", str(work["model"]), "--type", "f16", "--out", str(target),
                             "--json")  # fmt: skip
    assert code == 2, err
    finding = json.loads(out)["findings"][0]
    assert finding["code"] == "gguf-unknown-pre-tokenizer"
    ours = fingerprint(load_subject(work["model"])).chkhsh  # llama.cpp's hash equals onboard's fingerprint
    assert f"chkhsh {ours}" in finding["message"] and "Qwen2Tokenizer implies qwen2" in finding["message"]
    assert "get_vocab_base_pre" in finding["hint"]
    assert "rerun `onboard convert gguf` with `--pre-tokenizer qwen2`" in finding["hint"]  # the one-run fix first
    assert not target.exists() and not list(tmp_path.glob("*.partial")), "a refused conversion leaves no file"


def test_f16_passes_parity_tokenizer_under_load_and_measures_performance(work, capsys, tmp_path: Path) -> None:
    """--load starts llama.cpp with its prompt cache: repeated prompts hit it, and hits equal cold answers."""
    out_json = tmp_path / "validation.json"
    code, _, err = onboard(capsys, "validate", str(work["model"]), "--golden", str(work["golden"]), "--engine",
                           "llama.cpp", "--gguf", str(work["f16"]), "--load", "--load-levels", "1,4",
                           "--out", str(out_json))  # fmt: skip
    result = json.loads(out_json.read_text())
    checks = {c["name"]: c for c in result["checks"]}
    assert code == 0 and result["passed"], [c for c in result["checks"] if c["required"] and not c["passed"]]
    assert result["candidate"]["dtype"] == "float16" and "llama-cpp-python" in result["candidate"]["versions"]["engine"]
    assert checks["logit_parity"]["required"] and not checks["logit_parity"]["skipped"]
    assert checks["gguf_tokenizer"]["passed"] and checks["gguf_tokenizer"]["required"]
    perf = result["performance"]
    assert perf["prefill_by_length"] and perf["tpot_ms"] > 0, perf
    assert checks["serving_under_load"]["passed"] and checks["prefix_cache_hits"]["passed"], checks["prefix_cache_hits"]
    assert result["check_data"]["prefix_cache_hits"]["responses_with_hits"] > 0


def test_q8_0_is_judged_by_its_kl_budget(work, capsys, tmp_path: Path) -> None:
    base = ["validate", str(work["model"]), "--golden", str(work["golden"]), "--engine", "llama.cpp", "--gguf",
            str(work["q8_0"]), "--no-performance"]  # fmt: skip
    code, _, err = onboard(capsys, *base)
    assert code == 2 and "judged against a KL budget" in err  # refused before the engine starts
    code, _, err = onboard(capsys, *base, "--budget-kl", "0.002", "--out", str(tmp_path / "ok.json"))
    result = json.loads((tmp_path / "ok.json").read_text())
    budget = result["check_data"]["quantized_kl_budget"]
    assert code == 0 and result["passed"], err
    assert 0 < budget["measured_kl"] <= 0.002, budget
    assert not {c["name"]: c for c in result["checks"]}["logit_parity"]["required"]  # information for a quant
    print("Q8_0:", next(c["detail"] for c in result["checks"] if c["name"] == "quantized_kl_budget"))  # -s: figure
    # The same measurement against half of it fails (judged on this run's positions: no second engine run).
    from onboard.engines.served import kl_budget_check

    tight = kl_budget_check(result, budget["measured_kl"] / 2, None)
    assert not tight.passed and tight.required and "> budget" in tight.detail


@pytest.fixture(scope="module")
def plan(work, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """quantize-plan over the goldens at a 0.002 budget, llama.cpp's formats: (quantize-plan.json, the --json)."""
    plan_dir = tmp_path_factory.mktemp("plan")
    code, out = _main_json(["quantize-plan", str(work["model"]), "--golden", str(work["golden"]), "--budget-kl",
                            "0.002", "--formats", "llama.cpp", "--out", str(plan_dir), "--json"])  # fmt: skip
    summary = json.loads(out)
    assert code == 0 and summary["measured_kl"] <= 0.002, summary
    return plan_dir / "quantize-plan.json", summary


def _main_json(argv: list[str]) -> tuple[int, str]:
    import contextlib
    import io

    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout), pytest.raises(SystemExit) as exit_info:
        main(argv)
    return int(exit_info.value.code or 0), stdout.getvalue()


def test_a_quantize_plan_converts_serves_and_meets_its_budget(work, plan, capsys, tmp_path: Path) -> None:
    """docs/quantize.md's walk-through: quantize-plan over the goldens, convert with the plan's per-tensor types, validate
    the GGUF against the plan's budget (no --budget-kl: the plan's own), planned and measured side by side."""
    plan_file, summary = plan
    formats = {u["format"] for u in summary["units"]}
    assert len(formats) > 1, formats  # a mixed plan, not a uniform one in disguise
    gguf = tmp_path / "plan.gguf"
    code, out, err = onboard(capsys, "convert", "gguf", str(work["model"]), "--plan", str(plan_file), "--out",
                             str(gguf), "--pre-tokenizer", "qwen2", "--json")  # fmt: skip
    assert code == 0 and gguf.is_file(), err[-2000:]
    converted = json.loads(out)
    assert converted["type"] == "q8_0" and converted["file_type"] == "MOSTLY_Q8_0"  # the base a plan needs
    _assert_types_as_planned(gguf, converted)
    plan_dir = plan_file.parent
    out_json = tmp_path / "validation.json"
    code, _, err = onboard(capsys, "validate", str(work["model"]), "--golden", str(work["golden"]), "--engine",
                           "llama.cpp", "--gguf", str(gguf), "--plan", str(plan_dir / "quantize-plan.json"),
                           "--no-performance", "--out", str(out_json))  # fmt: skip
    result = json.loads(out_json.read_text())
    budget = result["check_data"]["quantized_kl_budget"]
    assert code == 0 and result["passed"], err[-3000:]
    assert budget["budget_kl"] == 0.002 and budget["planned_kl"] == pytest.approx(summary["measured_kl"])
    assert 0 < budget["measured_kl"] <= 0.002, budget
    types = next(c for c in result["checks"] if c["name"] == "gguf_plan_types")
    assert types["passed"] and types["required"], types
    print("plan:", next(c["detail"] for c in result["checks"] if c["name"] == "quantized_kl_budget"))  # -s: figure


def test_a_gguf_that_is_not_the_plan_is_refused_and_removed(work, plan, capsys, tmp_path: Path, monkeypatch) -> None:
    """llama.cpp skips a tensor's override silently (under an unquantized file type, or where the file type itself
    falls back on the tensor's rows): the GGUF is checked against the plan, and one that is not the plan removed."""
    from onboard.engines import llamacpp

    quantize = llamacpp.quantize

    def skipping_overrides(src: Path, out: Path, ftype: str, *_args: object, **_kwargs: object) -> Path:
        return quantize(src, out, ftype)  # every per-tensor type left out, as llama.cpp's silent skips do

    monkeypatch.setattr(llamacpp, "quantize", skipping_overrides)
    gguf = tmp_path / "not-the-plan.gguf"
    code, out, err = onboard(capsys, "convert", "gguf", str(work["model"]), "--plan", str(plan[0]), "--out",
                             str(gguf), "--pre-tokenizer", "qwen2", "--json")  # fmt: skip
    [finding] = json.loads(out)["findings"]
    assert code == 1 and finding["code"] == "gguf-plan-not-applied", finding
    assert "stored as Q8_0, the plan rounded it as" in finding["message"] and "was removed" in finding["message"]
    assert not gguf.exists() and not list(tmp_path.glob("*.partial"))
    # A GGUF made another way (every tensor Q8_0 here) is not judged against the plan's KL as if it were the plan.
    monkeypatch.undo()
    out_json = tmp_path / "validation.json"
    code, _, err = onboard(capsys, "validate", str(work["model"]), "--golden", str(work["golden"]), "--engine",
                           "llama.cpp", "--gguf", str(work["q8_0"]), "--plan", str(plan[0]), "--no-performance",
                           "--out", str(out_json))  # fmt: skip
    result = json.loads(out_json.read_text())
    types = next(c for c in result["checks"] if c["name"] == "gguf_plan_types")
    assert code == 1 and result["failed"] == ["gguf_plan_types"], (result["failed"], err[-1500:])
    assert "is not the plan in quantize-plan.json: " in types["detail"] and "stored as Q8_0" in types["detail"]


def _assert_types_as_planned(gguf_path: Path, converted: dict) -> None:
    """Every tensor a plan override names is stored in the type the plan's simulation rounded it to: the override's
    type, or llama.cpp's fallback where a K-quant does not fit the row (the fixture's 192- and 128-wide rows)."""
    import re

    from gguf import GGUFReader

    from onboard.quantize.formats import FORMATS

    tensors = {t.name: t for t in GGUFReader(str(gguf_path)).tensors}
    overrides = [(pattern, kind) for pattern, kind in converted["tensor_types"]]
    if converted["token_embedding_type"]:
        overrides.append((re.escape("token_embd.weight"), converted["token_embedding_type"]))
    assert len(overrides) > 1, converted
    for pattern, kind in overrides:
        named = [t for name, t in tensors.items() if re.fullmatch(pattern, name)]
        assert named, (pattern, sorted(tensors))
        for tensor in named:
            shape = tuple(int(d) for d in reversed(tensor.shape))  # GGUF lists ne0 (the row length) first
            expected = FORMATS[kind.lower()].resolve(shape).ggml_type
            assert tensor.tensor_type.name.lower() == expected.lower(), (tensor.name, kind, tensor.tensor_type.name)


def test_edited_rope_freq_base_fails_parity(work, capsys, tmp_path: Path) -> None:
    import gguf

    edited = tmp_path / "rope.gguf"
    shutil.copy(work["f16"], edited)
    reader = gguf.GGUFReader(str(edited), "r+")
    field = reader.fields["qwen3.rope.freq_base"]
    field.parts[field.data[0]][0] = 10000.0  # the converter wrote 1e6 (rope_theta); a 100x smaller base
    del reader
    out_json = tmp_path / "validation.json"
    code, _, _ = onboard(capsys, "validate", str(work["model"]), "--golden", str(work["golden"]), "--engine",
                         "llama.cpp", "--gguf", str(edited), "--no-performance", "--out", str(out_json))  # fmt: skip
    result = json.loads(out_json.read_text())
    assert code == 1 and "logit_parity" in result["failed"], result["failed"]


def test_wrong_pre_tokenizer_is_gguf_tokenizer_drift(work, tmp_path: Path) -> None:
    from onboard.engines import llamacpp
    from onboard.engines.served import Served, gguf_tokenizer_checks

    converted = llamacpp.convert(work["model"], tmp_path / "gpt2.gguf", "f16", pre_tokenizer="gpt-2")
    assert converted.path is not None, converted.findings
    with llamacpp.serve(converted.path, "q3", tmp_path / "server.log") as url:
        check = gguf_tokenizer_checks(Served(url, "q3", "float16", converted.path), work["model"])[0]
    assert not check.passed and check.required and check.detail.startswith("gguf-tokenizer-drift: ")
    assert check.data["text"] in check.detail or repr(check.data["text"][:80]) in check.detail
