"""The reference side of the tool-call check, recorded with the goldens (tool_calls.json in the golden folder): the
template's tool format and reasoning markers (tool_calls.detect), and per conversation of the suite
(tool_calls.suite) its rendering through the chat template with `tools=` (text and ids: what an engine must render
too), the reference's raw greedy answer (special tokens kept, the end-of-turn token apart) and onboard's parse of it
in the template's native format, or the named error the parse raised.

A template that never reads `tools` records `declared: false`: the check is then not applicable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from onboard.errors import InputError
from onboard.fsutil import atomic_write_json, read_json
from onboard.tool_calls.turn import ParsedTurn

TOOL_FILE = "tool_calls.json"
TOOL_FORMAT = "onboard-tool-golden/1"
DEFAULT_TOOL_TOKENS = 160
"""Room for a short reasoning block and two calls: a longer answer is cut (finish "length") and says so."""


class ToolAnswer(msgspec.Struct, frozen=True):
    name: str
    prompt: str
    """The rendering with the generation prompt: what the model continues."""
    prompt_ids: list[int]
    reasoning_open: bool
    generated_ids: list[int]
    raw: str
    """The answer as text, special tokens kept, without the end-of-turn token."""
    finish: str
    """"stop" (an end-of-turn token) or "length"."""
    parsed: dict[str, Any] | None = None
    """The parse as an OpenAI assistant message; None when the parse raised `error`."""
    error: str | None = None

    @property
    def turn(self) -> ParsedTurn | None:
        return ParsedTurn.from_openai(self.parsed) if self.parsed is not None else None


class ToolGolden(msgspec.Struct, frozen=True):
    format: str
    declared: bool
    """The template reads `tools`."""
    tool_format: str | None = None
    """A key of tool_calls.formats.FORMATS; None when the template's format is not one onboard reads."""
    format_evidence: str | None = None
    reasoning: str | None = None
    """A key of tool_calls.reasoning.MARKERS, or None."""
    max_new_tokens: int = DEFAULT_TOOL_TOKENS
    answers: list[ToolAnswer] = []


def record_tool_suite(reference: Any, folder: Path, max_new_tokens: int = DEFAULT_TOOL_TOKENS) -> ToolGolden:
    """The reference's greedy answers to the suite. `reference`: an in-process candidate (generate with stop ids)."""
    from onboard.tool_calls import suite
    from onboard.tool_calls.detect import declares_tools, recognise_format, recognise_reasoning

    try:
        tokenizer = suite.load_tokenizer(folder)
    except InputError:  # no chat template: the goldens' own load of the tokenizer has succeeded already
        return ToolGolden(TOOL_FORMAT, False)
    template = tokenizer.chat_template
    if not isinstance(template, str) or not declares_tools(template):
        return ToolGolden(TOOL_FORMAT, False)
    fmt, reasoning = recognise_format(template), recognise_reasoning(template)
    style = reasoning.name if reasoning else None
    golden = ToolGolden(
        TOOL_FORMAT, True, fmt.name if fmt else None, fmt.evidence if fmt else None, style, max_new_tokens
    )
    if fmt is None:
        return golden
    answers = [_answer(reference, tokenizer, c, fmt.name, style, max_new_tokens) for c in suite.CONVERSATIONS]
    return msgspec.structs.replace(golden, answers=answers)


def _answer(reference: Any, tokenizer: Any, conversation: Any, fmt: str, style: str | None, limit: int) -> ToolAnswer:
    from onboard.tool_calls import suite
    from onboard.tool_calls.errors import ToolCallError
    from onboard.tool_calls.formats import parse_turn

    rendered = suite.render(tokenizer, conversation, reasoning=style)
    generation = reference.generate([rendered.prompt_ids], limit, 1, ignore_eos=False)[0]
    ids = list(generation.ids)
    body = ids[:-1] if generation.finish_reason == "stop" else ids
    raw = tokenizer.decode(body, skip_special_tokens=False)
    answer = ToolAnswer(
        conversation.name,
        rendered.prompt,
        list(rendered.prompt_ids),
        rendered.reasoning_open,
        ids,
        raw,
        generation.finish_reason or "length",
    )
    try:
        turn = parse_turn(fmt, raw, conversation.tools, reasoning=style, reasoning_open=rendered.reasoning_open)
    except ToolCallError as exc:  # the reference's own broken call: recorded, the engine must break it alike
        return msgspec.structs.replace(answer, error=f"{type(exc).__name__}: {exc.message}")
    return msgspec.structs.replace(answer, parsed=turn.to_openai())


def write_tool_golden(folder: Path, golden: ToolGolden) -> None:
    atomic_write_json(folder / TOOL_FILE, msgspec.to_builtins(golden))


def read_tool_golden(folder: Path) -> ToolGolden | None:
    """tool_calls.json of a golden folder; None for goldens recorded without it; InputError when malformed."""
    path = folder / TOOL_FILE
    if not path.is_file():
        return None
    golden = read_json(path, ToolGolden, "re-record the goldens")
    if golden.format != TOOL_FORMAT:
        raise InputError(f"{path}: format {golden.format!r}, expected {TOOL_FORMAT!r}", "re-record the goldens")
    return golden
