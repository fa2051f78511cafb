"""Inputs judged before any engine runs: repository code refused by `convert gguf`, a plan's budget and planned KL
for a quantized GGUF, the converter's unsupported-architecture message as a finding."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from onboard.cli import main

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "trained-qwen3"


def test_repository_code_is_refused_before_the_converter(tmp_path: Path, capsys) -> None:
    model = tmp_path / "remote"
    shutil.copytree(FIXTURE, model, ignore=shutil.ignore_patterns("corpus.txt.gz", "*.safetensors"))
    config = json.loads((model / "config.json").read_text())
    config["auto_map"] = {"AutoConfig": "configuration_x.XConfig", "AutoModelForCausalLM": "modeling_x.XForCausalLM"}
    (model / "config.json").write_text(json.dumps(config))
    with pytest.raises(SystemExit) as exit_info:
        main(["convert", "gguf", str(model), "--out", str(tmp_path / "x.gguf")])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "carries repository code (auto_map)" in err
    assert not (tmp_path / "x.gguf").exists()


def test_budget_and_planned_kl_come_from_the_plan(tmp_path: Path) -> None:
    from onboard.engines.served import budget_from, kl_budget_check

    plan = tmp_path / "quantize-plan.json"
    plan.write_text(json.dumps({"budget_kl": 0.002, "measured_kl": 0.0015, "units": []}))
    assert budget_from(None, plan) == (0.002, 0.0015)
    assert budget_from(0.01, plan) == (0.01, 0.0015)  # the command line wins over the plan's budget
    result = {"positions": [{"kl": 0.001}, {"kl": 0.003}, {"kl": None}]}
    check = kl_budget_check(result, 0.002, 0.0015)
    assert check.passed and check.data["measured_kl"] == pytest.approx(0.002)
    assert "planned 0.0015" in check.detail and "over 2 positions" in check.detail
    assert not kl_budget_check(result, 0.0019, None).passed


def test_unknown_pre_tokenizer_names_the_one_run_fix_first() -> None:
    from onboard.engines.llamacpp import converter_findings

    digest = "ab" * 32
    log = f"WARNING:hf-to-gguf:** chkhsh:  {digest}\nNotImplementedError: BPE pre-tokenizer was not recognized"
    [finding] = converter_findings(log, FIXTURE)
    assert finding.code == "gguf-unknown-pre-tokenizer" and f"chkhsh {digest}" in finding.message
    # The trained fixture's tokenizer is in no llama.cpp release; its class says which pre-tokenizer it uses.
    assert (finding.hint or "").startswith(
        "For this conversion: rerun `onboard convert gguf` with `--pre-tokenizer qwen2`"
    )
    assert "get_vocab_base_pre()" in (finding.hint or "")


def test_unsupported_architecture_message_is_a_finding_with_the_fix() -> None:
    from onboard.engines.llamacpp import converter_findings

    log = (
        "INFO:hf-to-gguf:Model architecture: Qwen9ForCausalLM\nERROR:hf-to-gguf:Model Qwen9ForCausalLM is not supported"
    )
    [finding] = converter_findings(log, FIXTURE)
    assert finding.code == "gguf-unsupported-architecture" and finding.severity == "fatal"
    assert "Qwen9ForCausalLM" in finding.message and "--engine vllm" in (finding.hint or "")


@pytest.mark.llamacpp
@pytest.mark.usefixtures("_llamacpp_installed")
def test_converter_refusing_an_architecture_is_that_finding(tmp_path: Path, capsys) -> None:
    model = tmp_path / "new-arch"
    shutil.copytree(FIXTURE, model, ignore=shutil.ignore_patterns("corpus.txt.gz"))
    config = json.loads((model / "config.json").read_text())
    config["architectures"] = ["Qwen9ForCausalLM"]  # what a day-zero model looks like to this llama.cpp release
    (model / "config.json").write_text(json.dumps(config))
    with pytest.raises(SystemExit) as exit_info:
        main(["convert", "gguf", str(model), "--out", str(tmp_path / "x.gguf"), "--json"])
    finding = json.loads(capsys.readouterr().out)["findings"][0]
    assert exit_info.value.code == 2 and finding["code"] == "gguf-unsupported-architecture", finding
    assert "Qwen9ForCausalLM" in finding["message"] and not (tmp_path / "x.gguf").exists()


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (lambda p: p.update(units="all"), r"Expected `array`, got `str` - at `\$\.units`"),
        (
            lambda p: p["units"].__setitem__(0, "layer.0.attn.qkv"),
            r"Expected `object`, got `str` - at `\$\.units\[0\]`",
        ),
        (lambda p: p["units"][0].pop("format"), r"missing required field `format` - at `\$\.units\[0\]`"),
        (lambda p: p["units"][0].update(unit="layer0"), r"\$\.units\[0\]\.unit 'layer0' is not a unit quantize-plan"),
        (lambda p: p["units"][1].update(format="q2_k"), r"\$\.units\[1\]\.format 'q2_k' is not a known format"),
        (lambda p: p.update(budget_kl="small"), r"Expected `float \| null`, got `str` - at `\$\.budget_kl`"),
    ],
)
def test_a_plan_no_quantize_plan_wrote_is_named_before_any_engine_runs(tmp_path: Path, capsys, edit, says) -> None:
    # Before: a unit that is not an object, or a unit name without its layer, was a TypeError / IndexError deep in
    # the per-tensor mapping, after the converter had run (or a budget that is text reached the KL check).
    plan = {"budget_kl": 0.002, "measured_kl": 0.0015,
            "units": [{"unit": "layer.0.attn.qkv", "format": "q8_0"}, {"unit": "embedding+head", "format": "bf16"}]}  # fmt: skip
    edit(plan)
    path = tmp_path / "quantize-plan.json"
    path.write_text(json.dumps(plan))
    for argv in (["convert", "gguf", str(FIXTURE), "--plan", str(path), "--out", str(tmp_path / "x.gguf")],
                 ["validate", str(FIXTURE), "--engine", "llama.cpp", "--gguf", str(tmp_path / "x.gguf"),
                  "--plan", str(path)]):  # fmt: skip
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and "Error: " in err and "internal error" not in err, (argv[0], err)
        assert re.search(says, err) and "quantize-plan.json" in err, (argv[0], err)
    assert not (tmp_path / "x.gguf").exists()


@pytest.mark.parametrize("base", ["f16", "bf16", "f32"])
def test_a_plan_under_an_unquantized_file_type_is_refused_before_the_converter(tmp_path: Path, capsys, base) -> None:
    # llama.cpp applies per-tensor types only under a quantized file type: `--type f16 --plan` wrote a GGUF whose
    # layers all stayed F16 (only the embedding's and head's types applied), which validate --plan then judged
    # against the plan's budget as if it were the plan.
    plan = {"budget_kl": 0.002, "measured_kl": 0.0015, "units": [{"unit": "layer.0.attn.qkv", "format": "q4_k"}]}
    path = tmp_path / "quantize-plan.json"
    path.write_text(json.dumps(plan))
    with pytest.raises(SystemExit) as exit_info:
        main(["convert", "gguf", str(FIXTURE), "--type", base, "--plan", str(path), "--out", str(tmp_path / "x.gguf")])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and f"Error: --type {base} with --plan" in err, err
    assert "Hint: use --type q8_0 (or leave --type out)" in err and not (tmp_path / "x.gguf").exists()


@pytest.mark.parametrize(("key", "value"), [("vocab_size", 10**30), ("hidden_size", 256)])
def test_a_config_its_weights_contradict_is_refused_before_the_converter(tmp_path: Path, capsys, key, value) -> None:
    # llama.cpp's converter takes config.json at its word: vocab_size 10**30 had it pad the vocabulary until memory
    # ran out (5 GB after a minute, no end); inspect's comparison with the headers refuses it first.
    model = tmp_path / "contradicted"
    shutil.copytree(FIXTURE, model, ignore=shutil.ignore_patterns("corpus.txt.gz"))
    config = json.loads((model / "config.json").read_text())
    config[key] = value
    (model / "config.json").write_text(json.dumps(config))
    with pytest.raises(SystemExit) as exit_info:
        main(["convert", "gguf", str(model), "--out", str(tmp_path / "x.gguf")])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "config.json: the weights contradict it: " in err, err
    assert "onboard inspect" in err and not (tmp_path / "x.gguf").exists()
