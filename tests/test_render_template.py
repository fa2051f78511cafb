"""`onboard render-template`: exact output, transformers semantics, and clean errors for hostile templates."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from onboard.cli import cli
from onboard.errors import OnboardError


def _render(tmp_path: Path, template: str, context: dict, *extra: str):
    (tmp_path / "t.jinja").write_text(template, encoding="utf-8")
    (tmp_path / "ctx.json").write_text(json.dumps(context), encoding="utf-8")
    args = ["render-template", str(tmp_path / "t.jinja"), "--context", str(tmp_path / "ctx.json"), *extra]
    return CliRunner().invoke(cli, args, standalone_mode=False)


def test_renders_exactly_the_context_variables(tmp_path: Path) -> None:
    result = _render(
        tmp_path, "{{ bos_token }}|{{ custom }}|{{ eos_token is defined }}", {"bos_token": "<s>", "custom": 7}
    )
    assert result.exception is None
    assert result.stdout == "<s>|7|False"  # no default eos_token injected, no newline added


def test_transformers_semantics(tmp_path: Path) -> None:
    template = (
        "{% for m in messages %}\n  {{- m.content|tojson(indent=1) }}{% if loop.first %}{% continue %}{% endif %}X\n"
        "{% endfor %}{% generation %}[gen]{% endgeneration %}{% set ns = namespace(n=0) %}{{ dict(a=1).a }}"
    )
    result = _render(tmp_path, template, {"messages": [{"content": "é<"}, {"content": "b"}]})
    assert result.exception is None
    # trim_blocks/lstrip_blocks, loopcontrols, tojson with indent and without HTML escaping, generation block, dict().
    assert result.stdout == '"é<""b"X\n[gen]1'


def test_raise_exception_is_exit_1_with_message(tmp_path: Path) -> None:
    result = _render(tmp_path, "{{ raise_exception('Only user and assistant roles') }}", {"messages": []})
    assert isinstance(result.exception, OnboardError) and result.exception.exit_code == 1
    assert "Only user and assistant roles" in result.exception.message


def test_frozen_clock_is_reported(tmp_path: Path) -> None:
    result = _render(tmp_path, "{{ strftime_now('%Y-%m-%d') }}", {})
    assert result.stdout == "2025-01-15"
    assert "read the clock" in result.stderr
    dated = _render(tmp_path, "{{ strftime_now('%Y-%m-%d %H:%M') }}", {}, "--now", "2021-01-01T08:30")
    assert dated.stdout == "2021-01-01 08:30" and "frozen time 2021-01-01 08:30" in dated.stderr


@pytest.mark.parametrize(
    ("template", "kind"),
    [
        ("{{ ''.__class__.__mro__[1].__subclasses__() }}", "security"),
        ("{{ messages.__class__ }}", "security"),
        ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "timeout"),
        ("{% for i in range(100000) %}{{ 'abcdefghij' * 100 }}{% endfor %}", "output-limit"),
        ("{{ 'x' * 1000000000 }}", "security"),
        ("{% for %}", "syntax"),
    ],
    ids=["class-mro", "attr-class", "endless-loop", "huge-output", "memory-bomb", "syntax"],
)
def test_hostile_templates_get_clean_errors(tmp_path: Path, template: str, kind: str) -> None:
    result = _render(tmp_path, template, {"messages": []}, "--timeout", "2")
    assert isinstance(result.exception, OnboardError), result.exception
    assert result.exception.exit_code == 2 and kind in result.exception.message
    assert result.exception.hint


def test_hostile_template_through_the_entry_point_has_no_traceback(tmp_path: Path) -> None:
    (tmp_path / "t.jinja").write_text("{{ cycler.__init__.__globals__ }}", encoding="utf-8")
    (tmp_path / "ctx.json").write_text("{}", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "onboard", "render-template", str(tmp_path / "t.jinja"), "--context",
                           str(tmp_path / "ctx.json")], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("Error: template security") and "Traceback" not in proc.stderr


def test_bad_context_file_is_exit_2(tmp_path: Path) -> None:
    (tmp_path / "t.jinja").write_text("x", encoding="utf-8")
    (tmp_path / "ctx.json").write_text("[1, 2", encoding="utf-8")
    result = CliRunner().invoke(cli, ["render-template", str(tmp_path / "t.jinja"), "--context", str(tmp_path / "ctx.json")],
                                standalone_mode=False)  # fmt: skip
    assert isinstance(result.exception, OnboardError) and result.exception.exit_code == 2
    assert "ctx.json" in result.exception.message


def test_named_template_from_a_source_folder(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    config = {
        "chat_template": [{"name": "default", "template": "D{{ x }}"}, {"name": "tool_use", "template": "T{{ x }}"}]
    }
    (repo / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    (tmp_path / "ctx.json").write_text('{"x": 1}', encoding="utf-8")
    base = ["render-template", str(repo), "--context", str(tmp_path / "ctx.json")]
    assert CliRunner().invoke(cli, base, standalone_mode=False).stdout == "D1"
    assert CliRunner().invoke(cli, [*base, "--template-name", "tool_use"], standalone_mode=False).stdout == "T1"
    missing = CliRunner().invoke(cli, [*base, "--template-name", "nope"], standalone_mode=False)
    assert isinstance(missing.exception, OnboardError) and "tool_use" in (missing.exception.hint or "")


SYSTEM_THEN_TOOL_CALL = {
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "w", "arguments": {"c": "P"}}}]},
    ]
}
# Joins tool-call arguments as text (DeepSeek-R1's template does): raises on a dict, whoever speaks first.
JOINS_ARGUMENTS = (
    "{% for m in messages %}{{ m.role }}:{{ m.content or '' }}"
    "{% for c in m.tool_calls or [] %}{{ c.function.name + '(' + c.function.arguments + ')' }}{% endfor %}{% endfor %}"
)
# Refuses a system message, and later (like Gemma's) any role that is not user/assistant.
NO_SYSTEM = (
    "{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
    "{% for m in messages %}{% if m.role not in ('user', 'assistant') %}{{ raise_exception('roles') }}{% endif %}"
    "{{ m.role }}{% endfor %}"
)


def test_an_error_the_system_message_does_not_cause_is_not_blamed_on_it(tmp_path: Path) -> None:
    # Before: any error in a conversation that starts with a system message was "system role rejected", with the
    # system-merge polyfill as the fix (on DeepSeek-R1's template, for tool-call arguments given as an object).
    result = _render(tmp_path, JOINS_ARGUMENTS, SYSTEM_THEN_TOOL_CALL)
    assert isinstance(result.exception, OnboardError)
    assert result.exception.message.startswith("the template raised: TypeError: can only concatenate str")
    assert "pass `arguments` as a JSON string" in (result.exception.hint or "")


def test_the_system_message_is_blamed_when_it_is_what_the_template_refused(tmp_path: Path) -> None:
    for context in ({"messages": [{"role": "system", "content": "x"}, {"role": "user", "content": "y"}]},
                    {"messages": [{"role": "system", "content": "x"}, {"role": "tool", "content": "y"}]}):  # fmt: skip
        # Without the system message it renders, or fails further on (the tool role): the system came first.
        result = _render(tmp_path, NO_SYSTEM, context)
        assert isinstance(result.exception, OnboardError)
        assert result.exception.message == "system role rejected: the template raised: System role not supported"
        assert "--polyfill system-merge" in (result.exception.hint or "")


def test_verify_tokenizer_says_why_deepseek_r1_rejects_tool_calls(shared_data: Path) -> None:
    """DeepSeek-R1's template concatenates tool-call arguments as text; vLLM passes them as objects."""
    from onboard.verify_tokenizer import verify_tokenizer

    report = verify_tokenizer(str(shared_data / "deepseek" / "deepseek-r1_hf-mirror"))
    [finding] = [f for f in report.findings if f.code == "template-rejects-tools"]
    assert "can only concatenate str" in finding.message
    assert (finding.hint or "").startswith("tool-calling conversations fail in vLLM: the template joins tool-call")
