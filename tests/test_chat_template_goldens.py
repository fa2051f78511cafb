"""llama.cpp's chat-template golden renders through `onboard render-template` (35 cases; 6 need the system-merge
polyfill, and their plain render must report "system role rejected"), and llama.cpp's generation-prompt cases."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from onboard.cli import cli
from onboard.errors import OnboardError
from onboard.verify_tokenizer.sandbox import render_many
from tests.real_data import EXTRACTED

SYSTEM = "You are a helpful assistant"


@pytest.fixture(scope="module")
def cases() -> list[dict]:
    doc = json.loads((EXTRACTED / "llamacpp_chat_template_cases.json").read_text(encoding="utf-8"))
    return [c for c in doc["cases"] if c["expected_jinja"] is not None]


def _files(tmp_path: Path, case: dict) -> tuple[str, str]:
    template, context = tmp_path / "t.jinja", tmp_path / "ctx.json"
    template.write_text(case["template"], encoding="utf-8")
    ctx = {k: case[k] for k in ("messages", "bos_token", "eos_token", "add_generation_prompt")}
    context.write_text(json.dumps(ctx), encoding="utf-8")
    return str(template), str(context)


def _run(args: list[str]):
    return CliRunner().invoke(cli, args, standalone_mode=False)


def test_all_35_llamacpp_goldens_reproduce(cases: list[dict], tmp_path: Path) -> None:
    assert len(cases) == 35
    reproduced, via_polyfill = 0, 0
    for case in cases:
        template, context = _files(tmp_path, case)
        args = ["render-template", template, "--context", context]
        if case["llamacpp_system_merge_polyfill_applied"]:
            args += ["--polyfill", "system-merge"]
            via_polyfill += 1
        result = _run(args)
        assert result.exception is None, f"{case['name']}: {result.exception}"
        assert result.stdout == case["expected_jinja"], case["name"]
        reproduced += 1
    print(f"llama.cpp chat-template goldens: {reproduced}/35 ({via_polyfill} via --polyfill system-merge)")
    assert (reproduced, via_polyfill) == (35, 6)


def test_plain_render_of_polyfill_cases_reports_system_role_rejected(cases: list[dict], tmp_path: Path) -> None:
    polyfilled = [c for c in cases if c["llamacpp_system_merge_polyfill_applied"]]
    raised = 0
    for case in polyfilled:
        template, context = _files(tmp_path, case)
        result = _run(["render-template", template, "--context", context])
        if result.exception is not None:  # the template raises (Mistral v0.2, Gemma): exit 1 with the reason
            assert isinstance(result.exception, OnboardError) and result.exception.exit_code == 1
            assert "system role rejected" in result.exception.message
            raised += 1
        else:  # the template silently drops the system turn (Phi-3, Orion, Yandex): a warning on stderr
            assert "system role rejected" in result.stderr
            assert SYSTEM not in result.stdout
    assert raised == 2 and len(polyfilled) == 6


def test_render_template_writes_exact_bytes_through_the_entry_point(cases: list[dict], tmp_path: Path) -> None:
    case = next(c for c in cases if c["name"] == "Llama-3")
    template, context = _files(tmp_path, case)
    proc = subprocess.run([sys.executable, "-m", "onboard", "render-template", template, "--context", context],
                          capture_output=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout == case["expected_jinja"].encode("utf-8")  # byte-exact: nothing added, nothing stripped


def test_llamacpp_generation_prompts(shared_data: Path) -> None:
    """render(add_generation_prompt=True) minus render(False) equals llama.cpp's expected suffix (basic scenario)."""
    doc = json.loads((EXTRACTED / "llamacpp_generation_prompt_cases.json").read_text(encoding="utf-8"))
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Hey there!"},
    ]
    ok, total = 0, 0
    for case in doc["cases"]:
        if case["scenario"] != "basic":
            continue
        total += 1
        source = (shared_data / "llamacpp/templates" / Path(case["template_file"]).name).read_text(encoding="utf-8")
        base = {"messages": messages, "bos_token": "", "eos_token": "", "enable_thinking": True}
        with_prompt, without = render_many(
            source, [{**base, "add_generation_prompt": True}, {**base, "add_generation_prompt": False}]
        )
        assert with_prompt.ok and without.ok, (case["template_file"], with_prompt.message, without.message)
        suffix = with_prompt.text[len(without.text) :] if with_prompt.text.startswith(without.text) else None
        assert suffix == case["expected_generation_prompt"], case["template_file"]
        ok += 1
    print(f"llama.cpp generation prompts: {ok}/{total}")
    assert ok == total == 13
