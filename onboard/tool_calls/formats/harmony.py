"""gpt-oss's harmony messages: `<|channel|>analysis<|message|>…<|end|>` (reasoning), `<|channel|>final<|message|>…`
(the answer), `<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}<|call|>` (a call).

The generation starts after the prompt's `<|start|>assistant`; later messages repeat `<|start|>assistant`. The
recipient may stand in the header before or after the channel. As in vLLM: several analysis (or final) messages are
joined with a newline, commentary without a recipient is content (a preamble), and calls to built-in tools
(`browser.*`, `python`) are not function calls.
"""

from __future__ import annotations

import re

from onboard.tool_calls.turn import ParsedTurn, ToolCall, make_turn

START, MESSAGE, CHANNEL = "<|start|>", "<|message|>", "<|channel|>"
ENDS = ("<|end|>", "<|call|>", "<|return|>")
FUNCTIONS = "functions."
_RECIPIENT = re.compile(r"to=(\S+?)(?=\s|<\||$)")
_CHANNEL = re.compile(re.escape(CHANNEL) + r"(\w+)")


def parse(text: str) -> ParsedTurn:
    reasoning: list[str] = []
    content: list[str] = []
    calls: list[ToolCall] = []
    for piece in text.split(START):
        header, sep, body = piece.partition(MESSAGE)
        if not sep:
            continue  # text outside a message (whitespace between them)
        for end in ENDS:
            body = body.split(end, 1)[0]
        channel = _CHANNEL.search(header)
        recipient = _RECIPIENT.search(header)
        if recipient:
            if recipient.group(1).startswith(FUNCTIONS):
                calls.append(ToolCall(recipient.group(1).removeprefix(FUNCTIONS), body.strip()))
        elif channel and channel.group(1) == "analysis":
            reasoning.append(body)
        elif channel and channel.group(1) in ("final", "commentary"):
            content.append(body)
    return make_turn("\n".join(content), "\n".join(reasoning), calls)
