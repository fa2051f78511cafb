"""validate's `tool_calls` check: the suite's conversations (tool_calls.suite) sent to the endpoint with `tools=`,
non-streaming and streamed, its `tool_calls`, `reasoning_content` and finish_reason compared with the reference's
parse of its own greedy answers (recorded with the goldens: tool_golden.py), in tool_calls.engine_check.

Where the endpoint returns token ids (vLLM's `return_token_ids`), the prompt it rendered is compared with the
reference's rendering (a template that renders tools differently is a failure of its own), and the tokens it
generated with the reference's (a different answer is the model's difference, not the parser's). When the check
fails, parser advice runs vLLM's parsers offline on the reference's raw answers (tool_calls.vllm_parsers) and names
the `--tool-call-parser` / `--reasoning-parser` that read them as the reference does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from onboard.checks import Check, skipped
from onboard.tool_calls import suite
from onboard.tool_calls.engine_check import EngineAnswer, Outcome, compare_answer, summarise
from onboard.tool_calls.errors import ToolCallError
from onboard.tool_calls.stream import reassemble
from onboard.tool_calls.turn import ParsedTurn
from onboard.validate_serving.golden import GoldenSet
from onboard.validate_serving.openai_client import HTTPStatusError
from onboard.validate_serving.tool_golden import ToolAnswer, ToolGolden, read_tool_golden

NAME = "tool_calls"
SHOWN = 4  # differences quoted in the detail; all are in the check's data


def tool_calls_check(
    golden: GoldenSet,
    candidate: Any,
    *,
    tool_parser: str | None = None,
    reasoning_parser: str | None = None,
    tokenizer: Path | None = None,
) -> Check:
    """`tool_parser` / `reasoning_parser`: what the endpoint was started with (None: unknown, the format's own are
    assumed for advice); `tokenizer`: the checkpoint folder, for parser advice (None: no advice)."""
    tools = read_tool_golden(golden.folder)
    if tools is None:
        return skipped(
            NAME,
            "not checked: the goldens were recorded without the tool-call suite; re-record them "
            "(onboard golden record SOURCE)",
        )
    if not tools.declared:
        return skipped(
            NAME,
            "not applicable: the chat template declares no tool support (it never reads `tools`)",
            passed=True,
            not_applicable=True,
        )
    if tools.tool_format is None:
        return skipped(
            NAME,
            f"not checked: the template's tool-call format is not one onboard reads (hermes, llama3 "
            f"JSON, mistral, harmony, DeepSeek, Kimi K2, GLM); template line: "
            f"{tools.format_evidence or 'none found'}",
        )
    client = getattr(candidate, "client", None)
    if client is None or not hasattr(client, "chat"):
        return skipped(
            NAME,
            "not checked: an in-process candidate has no tool-call parser; validate the serving "
            "engine (--endpoint URL --served-model NAME, or --engine vllm)",
        )
    usable = [a for a in tools.answers if a.turn is not None]
    if not usable:
        return skipped(
            NAME,
            "not checked: none of the reference's own answers parses in its template's format: "
            + "; ".join(f"{a.name}: {a.error}" for a in tools.answers),
        )
    asker = _Asker(client, candidate.model, tools.max_new_tokens)
    try:
        outcomes = [_ask_one(asker, tools, answer) for answer in usable]
    except HTTPStatusError as exc:
        return skipped(
            NAME,
            f"not checked: the endpoint refuses chat requests with tools= ({exc}); start it with "
            f"tool parsing on (vLLM: --enable-auto-tool-choice --tool-call-parser "
            f"{_default_parsers(tools)[0]})",
        )
    summary = summarise(outcomes)
    configured = {"tool_call_parser": tool_parser, "reasoning_parser": reasoning_parser}
    data: dict[str, Any] = {
        "tool_format": tools.tool_format,
        "reasoning": tools.reasoning,
        "configured": configured,
        "summary": asdict(summary),
        "conversations": [o.to_dict() for o in outcomes],
        "not_compared": {a.name: a.error for a in tools.answers if a.turn is None},
    }
    passed = summary.agreeing == summary.conversations
    detail = summary.line()
    if not passed:
        shown = [f"{o.name}: {line}" for o in outcomes for line in (*o.differences, *o.errors, *o.stream_differences)]
        detail += "; " + "; ".join(shown[:SHOWN]) + (f"; … {len(shown) - SHOWN} more" if len(shown) > SHOWN else "")
        advice = _advice(tools, usable, tool_parser, reasoning_parser, tokenizer)
        data["advice"] = advice
        detail += "; " + advice["line"]
    return Check(NAME, passed, True, detail, data=data)


class _Asker:
    """Chat requests for the suite; vLLM's `return_token_ids` asked for until the endpoint refuses it."""

    def __init__(self, client: Any, model: str, max_tokens: int) -> None:
        self.client, self.model, self.max_tokens = client, model, max_tokens
        self.token_ids = True

    def body(self, conversation: suite.Conversation) -> dict[str, Any]:
        body = {
            "model": self.model,
            "messages": suite.api_messages(conversation),
            "tools": list(conversation.tools),
            "temperature": 0.0,
            "max_tokens": self.max_tokens,
        }
        return body | ({"return_token_ids": True} if self.token_ids else {})

    def full(self, conversation: suite.Conversation) -> Any:
        try:
            return self.client.chat(self.body(conversation))
        except HTTPStatusError:
            if not self.token_ids:
                raise
            self.token_ids = False  # an engine that refuses the extension: ask without it
            return self.client.chat(self.body(conversation))

    def stream(self, conversation: suite.Conversation) -> list[dict[str, Any]]:
        return [c for event in self.client.chat_stream(self.body(conversation)) for c in event.choices]


def _ask_one(asker: _Asker, tools: ToolGolden, answer: ToolAnswer) -> Outcome:
    conversation = next(c for c in suite.CONVERSATIONS if c.name == answer.name)
    reply = asker.full(conversation)
    choice = reply.choices[0] if reply.choices else {}
    notes, extra = _token_notes(answer, reply.prompt_token_ids, choice.get("token_ids"))
    full, problem = _engine_answer(choice.get("message"), choice.get("finish_reason"))
    chunks = asker.stream(conversation)
    streamed, stream_problem = _streamed_answer(chunks)
    reasoning = tools.reasoning is not None
    outcome = compare_answer(
        answer.name, answer.turn or ParsedTurn(), full, streamed, conversation.tools, reasoning=reasoning
    )
    differences = (*extra, *([problem] if problem else []), *outcome.differences)
    stream = (*([stream_problem] if stream_problem else []), *outcome.stream_differences)
    return Outcome(
        outcome.name,
        outcome.expected_call,
        outcome.triggered,
        outcome.calls,
        outcome.schema_valid,
        differences,
        stream,
        outcome.errors,
        tuple(notes),
    )


def _engine_answer(message: Any, finish: Any) -> tuple[EngineAnswer, str | None]:
    if not isinstance(message, dict):
        return EngineAnswer(ParsedTurn(), finish), f"the reply has no assistant message: {str(message)[:200]}"
    try:
        return EngineAnswer(ParsedTurn.from_openai(message), finish), None
    except (AttributeError, TypeError) as exc:
        return EngineAnswer(ParsedTurn(), finish), f"malformed assistant message ({exc}): {str(message)[:200]}"


def _streamed_answer(chunks: Sequence[dict[str, Any]]) -> tuple[EngineAnswer | None, str | None]:
    finish = next((c["finish_reason"] for c in reversed(chunks) if c.get("finish_reason")), None)
    try:
        return EngineAnswer(reassemble(c.get("delta") or {} for c in chunks), finish), None
    except ToolCallError as exc:
        return None, f"streamed: {type(exc).__name__}: {exc.message}"
    except (AttributeError, TypeError) as exc:
        return None, f"streamed: malformed delta ({exc})"


def _token_notes(answer: ToolAnswer, prompt_ids: Any, token_ids: Any) -> tuple[list[str], list[str]]:
    """(notes, differences) from the endpoint's token ids: its prompt rendered otherwise than the reference's is a
    difference; its generated tokens differing from the reference's is a note (the model's, not the parser's)."""
    notes, differences = [], []
    if prompt_ids is None:
        notes.append("the endpoint returns no prompt token ids: its rendering of the conversation is not compared")
    elif list(prompt_ids) != answer.prompt_ids:
        differences.append(
            f"the endpoint renders the conversation otherwise than the reference's chat template "
            f"({len(prompt_ids)} prompt tokens, the reference {len(answer.prompt_ids)}; first "
            f"difference at token {_first_difference(prompt_ids, answer.prompt_ids)})"
        )
    if isinstance(token_ids, list) and token_ids != answer.generated_ids[: len(token_ids)]:
        at = _first_difference(token_ids, answer.generated_ids)
        notes.append(
            f"the endpoint generated other tokens than the reference from token {at}: a difference of the "
            "model's computation, not of the parsers"
        )
    return notes, differences


def _first_difference(a: Sequence[int], b: Sequence[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def _default_parsers(tools: ToolGolden) -> tuple[str, str | None]:
    from onboard.tool_calls.formats import FORMATS

    fmt = FORMATS[tools.tool_format or ""]
    return fmt.vllm_tool_parser, fmt.vllm_reasoning_parser if tools.reasoning or fmt.name == "harmony" else None


def _advice(
    tools: ToolGolden,
    answers: Sequence[ToolAnswer],
    tool_parser: str | None,
    reasoning_parser: str | None,
    tokenizer: Path | None,
) -> dict[str, Any]:
    """vLLM's parser pairs that read every one of the reference's raw answers as onboard's parser does, streamed and
    not: every tool parser with the configured reasoning parser, every reasoning parser with the configured tool
    parser (the format's own standing in for one not given)."""
    from onboard.tool_calls.vllm_parsers import ParserJob, advice_jobs, matching, run_parsers

    if tokenizer is None:
        return {"matches": [], "line": "parser advice not run: no local checkpoint folder (its tokenizer is needed)"}
    default_tool, default_reasoning = _default_parsers(tools)
    base_tool = tool_parser or default_tool
    base_reasoning = reasoning_parser if reasoning_parser is not None else default_reasoning
    by_name = {c.name: c for c in suite.CONVERSATIONS}
    jobs = [
        job
        for a in answers
        for job in advice_jobs(ParserJob(a.name, a.raw, base_tool, base_reasoning, by_name[a.name].tools, a.prompt))
    ]
    try:
        run = run_parsers(jobs, tokenizer)
    except Exception as exc:  # ParsersUnavailable, or the worker's answer unreadable: advice is optional
        message = getattr(exc, "message", str(exc))
        return {"matches": [], "line": f"parser advice not run: {message}"}
    found = matching(run, {j.id: answers[i // 2].turn for i, j in enumerate(jobs)})
    matches = []
    for sweep in ("tools", "reasoning"):
        common = [set(found[f"{a.name}/{sweep}"]) for a in answers]
        matches += [m for m in found[f"{answers[0].name}/{sweep}"] if all(m in s for s in common)]
    matches = list(dict.fromkeys(matches))
    pairs = [{"tool_call_parser": m.tool_parser, "reasoning_parser": m.reasoning_parser} for m in matches]
    if not matches:
        line = (
            "none of vLLM's parsers reads the reference's answers as the reference does (with "
            f"--tool-call-parser {base_tool}, --reasoning-parser {base_reasoning})"
        )
    else:
        named = " or ".join(
            f"--tool-call-parser {m.tool_parser}"
            + (f" --reasoning-parser {m.reasoning_parser}" if m.reasoning_parser else "")
            for m in matches
        )
        line = f"vLLM's parsers that read the reference's answers right: {named}"
    return {"matches": pairs, "line": line}
