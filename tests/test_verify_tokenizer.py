"""verify-tokenizer on small repos built in tmp_path from real tokenizer files (Mixtral's, 32k vocab), one seeded
defect at a time: each must produce its finding code, and the clean repo none of them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from onboard.errors import InputError
from onboard.verify_tokenizer import verify_tokenizer

MIXTRAL = "mistral/mixtral-8x7b-v0.1_hf-mirror"
FILES = ("config.json", "generation_config.json", "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json")
# A Mistral-style template that accepts system, tools and tool results, and ends assistant turns with EOS.
CLEAN_TEMPLATE = (
    "{% for m in messages %}{% if m.role == 'system' %}[SYS]{{ m.content }}[/SYS]"
    "{% elif m.role == 'user' %}[INST] {{ m.content }} [/INST]"
    "{% elif m.role == 'assistant' %}{% if m.tool_calls %}[TOOL_CALLS]{{ m.tool_calls|tojson }}{% endif %}"
    "{{ m.content }}{{ eos_token }}{% elif m.role == 'tool' %}[TOOL_RESULTS]{{ m.content }}[/TOOL_RESULTS]{% endif %}"
    "{% endfor %}"
)
SEEDED = {"double-bos", "eos-mismatch", "pad-equals-eos", "tokenizer-exceeds-embedding", "special-token-not-special",
          "template-rejects-system", "template-rejects-tools", "template-reads-clock"}  # fmt: skip


def make_repo(shared: Path, dest: Path, template: str = CLEAN_TEMPLATE, **edits: dict) -> Path:
    """Copy Mixtral's tokenizer files to `dest`, set the chat template, apply {file: {key: value}} edits."""
    dest.mkdir(parents=True)
    for name in FILES:
        shutil.copy(shared / MIXTRAL / name, dest / name)
    edits = {"tokenizer_config.json": {}, **{k.replace("__", "."): v for k, v in edits.items()}}
    edits["tokenizer_config.json"] = {"chat_template": template, **edits["tokenizer_config.json"]}
    for name, changes in edits.items():
        doc = json.loads((dest / name).read_text(encoding="utf-8"))
        doc.update(changes)
        (dest / name).write_text(json.dumps(doc), encoding="utf-8")
    return dest


def codes(report) -> dict[str, str]:
    return {f.code: f.severity for f in report.findings}


@pytest.fixture()
def shared(shared_data: Path) -> Path:
    return shared_data


def test_clean_repo_has_none_of_the_seeded_findings(shared: Path, tmp_path: Path) -> None:
    report = verify_tokenizer(str(make_repo(shared, tmp_path / "clean")), golden_dir=tmp_path / "g")
    found = codes(report)
    assert not SEEDED & set(found), found
    assert report.exit_code == 0, [f for f in report.findings if f.severity == "error"]
    assert report.template is not None and report.template.end_of_turn == [2]
    assert report.special_tokens.stop_ids == [2]
    assert report.passed and report.stage == "verify-tokenizer"
    # SentencePiece models are not in llama.cpp's BPE fingerprint table: only the optional check fails.
    assert [c.name for c in report.checks if not c.passed] == ["fingerprint_known"]
    assert report.stop_set[0].token == "</s>"
    assert "reference-match" in found  # the raw tokenizer.json agrees with what transformers builds


def test_double_bos(shared: Path, tmp_path: Path) -> None:
    report = verify_tokenizer(
        str(make_repo(shared, tmp_path / "r", "{{ bos_token }}" + CLEAN_TEMPLATE)), golden_dir=tmp_path / "g"
    )
    assert codes(report)["double-bos"] == "warning"  # template BOS + the tokenizer's own BOS
    twice = verify_tokenizer(str(make_repo(shared, tmp_path / "r2", "{{ bos_token }}{{ bos_token }}" + CLEAN_TEMPLATE)),
                             golden_dir=tmp_path / "g")  # fmt: skip
    assert codes(twice)["double-bos"] == "error" and twice.exit_code == 1


def test_eos_in_generation_config_differs_from_tokenizer(shared: Path, tmp_path: Path) -> None:
    repo = make_repo(shared, tmp_path / "r", generation_config__json={"eos_token_id": [32]})
    assert codes(verify_tokenizer(str(repo), golden_dir=tmp_path / "g"))["eos-mismatch"] == "error"


def test_pad_equals_eos(shared: Path, tmp_path: Path) -> None:
    repo = make_repo(shared, tmp_path / "r", tokenizer_config__json={"pad_token": "</s>"})
    assert codes(verify_tokenizer(str(repo), golden_dir=tmp_path / "g"))["pad-equals-eos"] == "warning"


def test_tokenizer_larger_than_embedding(shared: Path, tmp_path: Path) -> None:
    repo = make_repo(shared, tmp_path / "r", config__json={"vocab_size": 31990})
    report = verify_tokenizer(str(repo), golden_dir=tmp_path / "g")
    assert codes(report)["tokenizer-exceeds-embedding"] == "error" and report.exit_code == 1
    # The explicit row count (what inspect reads from the safetensors header) wins over config.json.
    assert "tokenizer-exceeds-embedding" not in codes(
        verify_tokenizer(str(repo), golden_dir=tmp_path / "g", embedding_rows=32000)
    )


def test_special_token_not_marked_special(shared: Path, tmp_path: Path) -> None:
    repo = make_repo(shared, tmp_path / "r")
    tok = json.loads((repo / "tokenizer.json").read_text(encoding="utf-8"))
    next(t for t in tok["added_tokens"] if t["content"] == "</s>")["special"] = False
    (repo / "tokenizer.json").write_text(json.dumps(tok), encoding="utf-8")
    config = json.loads((repo / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["added_tokens_decoder"]["2"]["special"] = False
    (repo / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    assert codes(verify_tokenizer(str(repo), golden_dir=tmp_path / "g"))["special-token-not-special"] == "warning"


@pytest.mark.parametrize(
    ("prefix", "code"),
    [
        ("{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}",
         "template-rejects-system"),
        ("{% for m in messages %}{% if m.role == 'tool' %}{{ raise_exception('Unknown role: tool') }}{% endif %}{% endfor %}",
         "template-rejects-tools"),
        ("{% set date_string = strftime_now('%d %b %Y') %}Today: {{ date_string }}\n", "template-reads-clock"),
    ],
    ids=["system", "tools", "clock"],
)  # fmt: skip
def test_template_defects(shared: Path, tmp_path: Path, prefix: str, code: str) -> None:
    report = verify_tokenizer(
        str(make_repo(shared, tmp_path / "r", prefix + CLEAN_TEMPLATE)), golden_dir=tmp_path / "g"
    )
    assert code in codes(report)
    assert not (SEEDED - {code}) & set(codes(report))


def test_template_dropping_the_system_message_is_rejection_too(shared: Path, tmp_path: Path) -> None:
    template = CLEAN_TEMPLATE.replace("[SYS]{{ m.content }}[/SYS]", "")
    report = verify_tokenizer(str(make_repo(shared, tmp_path / "r", template)), golden_dir=tmp_path / "g")
    finding = next(f for f in report.findings if f.code == "template-rejects-system")
    assert "drops the system message" in finding.message


def test_hostile_template_is_an_error_finding(shared: Path, tmp_path: Path) -> None:
    report = verify_tokenizer(
        str(make_repo(shared, tmp_path / "r", "{{ messages.__class__.__mro__ }}")), golden_dir=tmp_path / "g"
    )
    assert codes(report)["template-unusable"] == "error"


def test_corrupt_tokenizer_json_is_input_error(shared: Path, tmp_path: Path) -> None:
    repo = make_repo(shared, tmp_path / "r")
    data = (repo / "tokenizer.json").read_bytes()
    (repo / "tokenizer.json").write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError) as err:
        verify_tokenizer(str(repo), golden_dir=tmp_path / "g")
    assert "tokenizer" in err.value.message and err.value.hint


@pytest.mark.parametrize("broken", ["tokenizer.json", "tokenizer_config.json"])
def test_cli_corrupt_files_exit_2_without_traceback(shared: Path, tmp_path: Path, broken: str) -> None:
    repo = make_repo(shared, tmp_path / "r")
    (repo / broken).write_text('{"model": {"type": "BPE", "vocab": ', encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "onboard", "verify-tokenizer", str(repo), "--golden", str(tmp_path / "g")],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("Error: ") and "Traceback" not in proc.stderr and "Hint: " in proc.stderr


def test_cli_json_report_and_exit_code(shared: Path, tmp_path: Path) -> None:
    repo = make_repo(shared, tmp_path / "r", generation_config__json={"eos_token_id": 32})
    proc = subprocess.run([sys.executable, "-m", "onboard", "verify-tokenizer", str(repo), "--golden", str(tmp_path / "g"), "--json",
                           "--record"], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert "eos-mismatch" in {f["code"] for f in report["findings"]}
    assert report["special_tokens"]["stop_ids"] == [2, 32] and "eos-mismatch" in proc.stderr
    # The stage-result contract: stage, passed, checks (the names checklists/day-zero.yaml links), stop_set.
    assert report["stage"] == "verify-tokenizer" and report["passed"] is False
    checks = {c["name"]: c for c in report["checks"]}
    assert set(checks) >= {"tokenizer_parity", "chat_template_parity", "declared_stop_set", "round_trip",
                           "special_tokens", "fingerprint_known"}  # fmt: skip
    assert all(
        set(c) == {"name", "passed", "required", "detail", "skipped", "not_applicable"} for c in report["checks"]
    )
    assert not checks["declared_stop_set"]["passed"] and "eos-mismatch" in checks["declared_stop_set"]["detail"]
    assert not checks["tokenizer_parity"]["passed"] and checks["chat_template_parity"]["passed"]
    assert checks["fingerprint_known"]["required"] is False
    assert report["stop_set"] == [{"id": 2, "token": "</s>", "sources": ["tokenizer_eos", "config.json", "end_of_turn"]},
                                  {"id": 32, "token": "<0x1D>", "sources": ["generation_config.json"]}]  # fmt: skip
    # Promotion reads the emitted checks as they are (no derivation from findings).
    from onboard.promote.stage_results import load_stage_results

    (tmp_path / "verify-tokenizer.json").write_text(proc.stdout, encoding="utf-8")
    stage = load_stage_results(tmp_path).get("verify-tokenizer")
    assert stage is not None and stage.error is None and stage.passed is False
    assert [c.name for c in stage.checks] == [c["name"] for c in report["checks"]]
    assert stage.check("tokenizer_parity").passed is False
