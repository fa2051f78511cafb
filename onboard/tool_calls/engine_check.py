"""An engine's answer to one suite conversation against the reference's parse of its own raw answer, and the
vendor-verifier summary over the suite (as public tool-call verifiers compare providers): trigger similarity (F1 of
"calls a tool", the reference's decision as truth) and schema accuracy (the engine's calls whose arguments are valid
against the tool's schema).

An engine answer is the assistant message and finish_reason of a non-streaming request, and the same request
streamed, its deltas reassembled. Calls that cannot be used (not JSON, empty arguments, a function not offered) are
named errors (tool_calls.errors), reported as differences, never raised.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from onboard import serde
from onboard.tool_calls.arguments import check_call
from onboard.tool_calls.errors import ToolCallError
from onboard.tool_calls.turn import ParsedTurn, diff_turns

TOOL_FINISH = "tool_calls"


@dataclass(frozen=True)
class EngineAnswer:
    turn: ParsedTurn
    finish_reason: str | None

    @property
    def triggered(self) -> bool:
        """The engine says it called a tool: finish_reason `tool_calls` (OpenAI's), or calls in the message."""
        return self.finish_reason == TOOL_FINISH or self.turn.called


@dataclass(frozen=True)
class Outcome:
    name: str
    expected_call: bool
    triggered: bool
    calls: int
    """The engine's calls (non-streaming)."""
    schema_valid: int
    """Of those, the ones usable and valid against the tool's schema."""
    differences: tuple[str, ...] = ()
    """Non-streaming answer vs the reference's parse."""
    stream_differences: tuple[str, ...] = ()
    """The reassembled stream vs the non-streaming answer."""
    errors: tuple[str, ...] = ()
    """Named errors of the engine's calls (malformed JSON, unknown function, empty arguments) and schema breaks."""
    notes: tuple[str, ...] = field(default=())
    """What else was seen (the prompt rendered differently, the engine's raw text), for the report."""

    @property
    def agrees(self) -> bool:
        return not (self.differences or self.stream_differences or self.errors)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "agrees": self.agrees} | serde.to_dict(self)


def compare_answer(
    name: str,
    reference: ParsedTurn,
    full: EngineAnswer,
    streamed: EngineAnswer | None,
    tools: Sequence[Mapping[str, Any]],
    *,
    reasoning: bool,
) -> Outcome:
    """`full` (and `streamed`, None when the stream failed to reassemble: a difference is then expected in `notes`)
    against `reference`; `reasoning`: compare reasoning_content too (the template has reasoning markers)."""
    differences = diff_turns(reference, full.turn, reasoning=reasoning)
    if full.triggered != reference.called:
        finish = f"finish_reason {full.finish_reason!r}"
        differences.append(
            f"{finish}: {'a tool call' if full.triggered else 'no tool call'} where the reference "
            f"{'calls' if reference.called else 'does not call'} one"
        )
    elif full.turn.called and full.finish_reason != TOOL_FINISH:
        differences.append(f"finish_reason {full.finish_reason!r} with tool calls (OpenAI's is {TOOL_FINISH!r})")
    errors, valid = [], 0
    for index, call in enumerate(full.turn.tool_calls):
        try:
            broken = check_call(call, tools, index)
        except ToolCallError as exc:
            errors.append(f"{type(exc).__name__}: {exc.message}")
            continue
        errors += [f"tool call {index} ({call.name!r}) breaks its schema: {line}" for line in broken]
        valid += not broken
    stream: list[str] = []
    if streamed is not None:
        stream = [f"streamed: {line}" for line in diff_turns(full.turn, streamed.turn, reasoning=reasoning)]
        if streamed.finish_reason != full.finish_reason:
            stream.append(f"streamed finish_reason {streamed.finish_reason!r}, non-streaming {full.finish_reason!r}")
    return Outcome(
        name,
        reference.called,
        full.triggered,
        len(full.turn.tool_calls),
        valid,
        tuple(differences),
        tuple(stream),
        tuple(errors),
    )


@dataclass(frozen=True)
class Summary:
    conversations: int
    agreeing: int
    trigger_similarity: float
    """F1 of the engine's "calls a tool" against the reference's (1.0 when neither ever calls)."""
    schema_accuracy: float | None
    """Valid calls / the engine's calls; None when it made none."""
    calls: int

    def line(self) -> str:
        schema = f"{self.schema_accuracy:.0%}" if self.schema_accuracy is not None else "n/a (no calls)"
        return (
            f"{self.agreeing}/{self.conversations} conversations agree with the reference; trigger similarity "
            f"{self.trigger_similarity:.0%}, schema accuracy {schema} over {self.calls} calls"
        )


def summarise(outcomes: Sequence[Outcome]) -> Summary:
    both = sum(o.expected_call and o.triggered for o in outcomes)
    extra = sum(o.triggered and not o.expected_call for o in outcomes)
    missed = sum(o.expected_call and not o.triggered for o in outcomes)
    f1 = 2 * both / (2 * both + extra + missed) if (both + extra + missed) else 1.0
    calls = sum(o.calls for o in outcomes)
    accuracy = sum(o.schema_valid for o in outcomes) / calls if calls else None
    return Summary(len(outcomes), sum(o.agrees for o in outcomes), f1, accuracy, calls)
