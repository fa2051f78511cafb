"""The native tool-call formats onboard reads, and `parse_turn`: reasoning split, calls extracted, each call checked
against the offered tools.

Each extractor takes (text, tools) and returns (content, calls). As in vLLM's parsers, content is the text before
the calls and text after a call is dropped. A format's row names the vLLM `--tool-call-parser` and
`--reasoning-parser` that read it: what an endpoint serving the model should be configured with.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from onboard.tool_calls.arguments import decode_arguments, find_tool, spec_of
from onboard.tool_calls.errors import MalformedToolCall, UnknownFormat
from onboard.tool_calls.reasoning import split_reasoning
from onboard.tool_calls.turn import ParsedTurn, ToolCall, make_turn

Tools = Sequence[Mapping[str, Any]]
_DECODER = json.JSONDecoder()


def _load_json(text: str, index: int, what: str) -> Any:
    return _raw_json(text.strip(), 0, index, what)[0]


def _raw_json(text: str, pos: int, index: int, what: str) -> tuple[Any, int]:
    """The JSON value starting at `pos` (after whitespace) and where it ends."""
    while pos < len(text) and text[pos].isspace():
        pos += 1
    try:
        return _DECODER.raw_decode(text, pos)
    except json.JSONDecodeError as exc:
        raise MalformedToolCall(
            f"tool call {index}: {what} is not valid JSON ({exc.msg} at character {exc.pos}): "
            f"{text[pos : pos + 200]!r}",
            "the model wrote invalid JSON inside the call, or the call was cut short (max_tokens)",
            call=index,
        ) from exc


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _call_from_object(obj: Any, index: int, argument_keys: tuple[str, ...] = ("arguments",)) -> ToolCall:
    """A call from `{"name": ..., <argument key>: {...}}`."""
    if not isinstance(obj, Mapping) or not isinstance(obj.get("name"), str):
        raise MalformedToolCall(
            f"tool call {index} has no function name: {_dumps(obj)[:200]}",
            'a call is a JSON object with a "name" string',
            call=index,
        )
    key = next((k for k in argument_keys if k in obj), None)
    if key is None:
        keys = " or ".join(f'"{k}"' for k in argument_keys)
        raise MalformedToolCall(
            f"tool call {index} ({obj['name']!r}) has no {keys}: {_dumps(obj)[:200]}",
            f"a call carries its arguments under {keys}",
            call=index,
            name=obj["name"],
        )
    return ToolCall(obj["name"], _dumps(obj[key]))


def _call_blocks(
    text: str, opens: str, call_begin: str, call_end: str | None, section_end: str | None = None
) -> tuple[str, list[tuple[str, bool]]]:
    """The content before `opens` (a section marker, or the first call's own marker), and each call's text between
    `call_begin` and `call_end` (or the next `call_begin`) with whether `call_end` closed it."""
    first = text.find(opens)
    if first == -1:
        return text, []
    rest = text[first if opens == call_begin else first + len(opens) :]
    if section_end:
        rest = rest.split(section_end, 1)[0]
    blocks = []
    for chunk in rest.split(call_begin)[1:]:
        block, closed, _ = chunk.partition(call_end) if call_end else (chunk, "", "")
        blocks.append((block, bool(closed)))
    return text[:first], blocks


def _unterminated(index: int, name: str | None, marker: str) -> MalformedToolCall:
    return MalformedToolCall(
        f"tool call {index} is not closed by {marker}",
        "the generation stopped inside the call (max_tokens, or a stop string that cuts it)",
        call=index,
        name=name,
    )


def hermes(text: str, tools: Tools = ()) -> tuple[str, list[ToolCall]]:
    """`<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>` per call (Qwen2.5/3, QwQ, Hermes, SmolLM3,
    Granite 4). An unclosed last block is read to the end of the text, as vLLM does."""
    content, blocks = _call_blocks(text, "<tool_call>", "<tool_call>", "</tool_call>")
    calls = [_load_json(block, i, "the call") for i, (block, _) in enumerate(blocks)]
    return content, [_call_from_object(obj, i) for i, obj in enumerate(calls)]


LLAMA_ARGUMENT_KEYS = ("parameters", "arguments")


def llama3_json(text: str, tools: Tools = ()) -> tuple[str, list[ToolCall]]:
    """Llama 3.x / 4: `{"name": ..., "parameters": {...}}`, optionally after `<|python_tag|>`, several separated by
    `;`. The whole answer is the call. Built-in tools (`brave_search.call(...)`) are Python, not read here."""
    body = text.strip()
    tagged = body.startswith("<|python_tag|>")
    body = body.removeprefix("<|python_tag|>").lstrip()
    if not body.startswith("{") or (not tagged and not _looks_like_llama_call(body)):
        return text, []
    calls: list[ToolCall] = []
    pos = 0
    while pos < len(body) and body[pos] == "{":
        obj, pos = _raw_json(body, pos, len(calls), "the call")
        calls.append(_call_from_object(obj, len(calls), LLAMA_ARGUMENT_KEYS))
        while pos < len(body) and (body[pos].isspace() or body[pos] == ";"):
            pos += 1
    return "", calls


def _looks_like_llama_call(body: str) -> bool:
    """An untagged answer is a call when its JSON object has a "name": `{"a": 1}` asked for by the user is content."""
    try:
        obj, _ = _raw_json(body, 0, 0, "the call")
    except MalformedToolCall:
        return '"name"' in body[:64]  # a call the model broke: let the parse name the JSON error
    return isinstance(obj, dict) and "name" in obj and any(k in obj for k in LLAMA_ARGUMENT_KEYS)


def mistral(text: str, tools: Tools = ()) -> tuple[str, list[ToolCall]]:
    """`[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]` (v3 tokenizers) or `[TOOL_CALLS]name[ARGS]{...}` per
    call (v11+; `name[CALL_ID]id[ARGS]` in history skips the id), told apart by the text after each marker."""
    content, blocks = _call_blocks(text, "[TOOL_CALLS]", "[TOOL_CALLS]", None)
    calls: list[ToolCall] = []
    for chunk, _ in blocks:
        head = chunk.lstrip()
        if head.startswith(("[", "{")):
            value = _raw_json(head, 0, len(calls), "the call list")[0]
            for obj in value if isinstance(value, list) else [value]:
                calls.append(_call_from_object(obj, len(calls)))
            continue
        name, sep, arguments = chunk.partition("[ARGS]")
        if not sep:
            raise MalformedToolCall(
                f"tool call {len(calls)}: [TOOL_CALLS] is followed by neither a JSON list nor "
                f"a name and [ARGS]: {chunk[:200]!r}",
                "v11+ Mistral calls read [TOOL_CALLS]name[ARGS]{...}",
                call=len(calls),
            )
        value = _raw_json(arguments, 0, len(calls), "the arguments")[0]
        calls.append(ToolCall(name.partition("[CALL_ID]")[0].strip(), _dumps(value)))
    return content, calls


_RECIPIENT = re.compile(r"to=(\S+?)(?=\s|<\||$)")
_CHANNEL = re.compile(re.escape("<|channel|>") + r"(\w+)")


def harmony(text: str) -> ParsedTurn:
    """gpt-oss: `<|channel|>analysis<|message|>…<|end|>` (reasoning), `final` (the answer), `commentary
    to=functions.NAME <|constrain|>json<|message|>{...}<|call|>` (a call), the recipient before or after the channel.
    As in vLLM: messages of a channel are joined with a newline, commentary without a recipient is content, and calls
    to built-in tools (`browser.*`, `python`) are not function calls."""
    reasoning: list[str] = []
    content: list[str] = []
    calls: list[ToolCall] = []
    for piece in text.split("<|start|>"):
        header, sep, body = piece.partition("<|message|>")
        if not sep:
            continue  # text outside a message (whitespace between them)
        for end in ("<|end|>", "<|call|>", "<|return|>"):
            body = body.split(end, 1)[0]
        channel = _CHANNEL.search(header)
        recipient = _RECIPIENT.search(header)
        if recipient:
            if recipient.group(1).startswith("functions."):
                calls.append(ToolCall(recipient.group(1).removeprefix("functions."), body.strip()))
        elif channel and channel.group(1) == "analysis":
            reasoning.append(body)
        elif channel and channel.group(1) in ("final", "commentary"):
            content.append(body)
    return make_turn("\n".join(content), "\n".join(reasoning), calls)


DEEPSEEK_SEP = "<｜tool▁sep｜>"
_DEEPSEEK_FENCED = re.compile(r"\s*(?P<name>[^\n]*)\n```(?:json)?\n(?P<args>.*)\n```\s*$", re.DOTALL)


def _deepseek(text: str, call: Callable[[int, str, str], ToolCall]) -> tuple[str, list[ToolCall]]:
    """Blocks `<｜tool▁call▁begin｜>…<｜tool▁call▁end｜>` inside `<｜tool▁calls▁begin｜>…<｜tool▁calls▁end｜>`, each read
    by `call(index, before the separator, after it)`."""
    content, blocks = _call_blocks(
        text, "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>"
    )
    calls: list[ToolCall] = []
    for block, closed in blocks:
        head, sep, tail = block.partition(DEEPSEEK_SEP)
        if not sep:
            raise MalformedToolCall(
                f"tool call {len(calls)} has no {DEEPSEEK_SEP}: {block[:200]!r}",
                f"DeepSeek calls separate the name and the arguments with {DEEPSEEK_SEP}",
                call=len(calls),
            )
        if not closed:
            raise _unterminated(len(calls), head.strip() or None, "<｜tool▁call▁end｜>")
        calls.append(call(len(calls), head, tail))
    return content, calls


def deepseek_v3(text: str, tools: Tools = ()) -> tuple[str, list[ToolCall]]:
    """DeepSeek V3 / R1: `function<｜tool▁sep｜>NAME\\n```json\\n{...}\\n```` per call."""

    def call(index: int, head: str, tail: str) -> ToolCall:
        match = _DEEPSEEK_FENCED.match(tail)
        if not match:
            raise MalformedToolCall(
                f"tool call {index}: expected NAME, then ```json arguments ``` after {DEEPSEEK_SEP}: {tail[:200]!r}",
                "DeepSeek V3 / R1 calls read function<｜tool▁sep｜>NAME\\n```json\\n{...}\\n```",
                call=index,
            )
        return ToolCall(match.group("name").strip(), _dumps(_load_json(match.group("args"), index, "the arguments")))

    return _deepseek(text, call)


def deepseek_v31(text: str, tools: Tools = ()) -> tuple[str, list[ToolCall]]:
    """DeepSeek V3.1: `NAME<｜tool▁sep｜>{...}` per call."""
    return _deepseek(
        text, lambda index, head, tail: ToolCall(head.strip(), _dumps(_load_json(tail, index, "the arguments")))
    )


def kimi_k2(text: str, tools: Tools = ()) -> tuple[str, list[ToolCall]]:
    """`<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{...}
    <|tool_call_end|>…<|tool_calls_section_end|>`: the header is Kimi's call id, the name its part before `:N`."""
    content, blocks = _call_blocks(
        text, "<|tool_calls_section_begin|>", "<|tool_call_begin|>", "<|tool_call_end|>", "<|tool_calls_section_end|>"
    )
    calls: list[ToolCall] = []
    for block, closed in blocks:
        header, sep, arguments = block.partition("<|tool_call_argument_begin|>")
        name = header.strip().split(":")[0].removeprefix("functions.")
        if not sep or not name:
            raise MalformedToolCall(
                f"tool call {len(calls)}: expected functions.NAME:N<|tool_call_argument_begin|>{{...}}, "
                f"got {block[:200]!r}",
                "Kimi K2 calls read <|tool_call_begin|>functions.NAME:N"
                "<|tool_call_argument_begin|>{...}<|tool_call_end|>",
                call=len(calls),
            )
        if not closed:
            raise _unterminated(len(calls), name, "<|tool_call_end|>")
        calls.append(ToolCall(name, _dumps(_load_json(arguments, len(calls), "the arguments"))))
    return content, calls


_GLM_ARGUMENT = re.compile(r"<arg_key>(?P<key>.*?)</arg_key>\s*<arg_value>(?P<value>.*?)</arg_value>", re.DOTALL)
_IS_TYPE = {
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "null": lambda v: v is None,
}


def glm(text: str, tools: Tools = ()) -> tuple[str, list[ToolCall]]:
    """GLM 4.5+: `<tool_call>NAME\\n<arg_key>k</arg_key>\\n<arg_value>v</arg_value>…</tool_call>` (4.7: no newlines).
    Values are text; one is read as JSON where the tool's schema types the parameter other than string (vLLM's
    glm45 parser coerces the same way), else it stays a string."""
    content, blocks = _call_blocks(text, "<tool_call>", "<tool_call>", "</tool_call>")
    calls: list[ToolCall] = []
    for block, closed in blocks:
        name, _, rest = block.partition("<arg_key>")
        name = name.strip()
        if not name:
            raise MalformedToolCall(
                f"tool call {len(calls)} has no function name: {block[:200]!r}",
                "GLM calls read <tool_call>NAME<arg_key>…",
                call=len(calls),
            )
        if not closed:
            raise _unterminated(len(calls), name, "</tool_call>")
        properties = ((spec_of(tools, name) or {}).get("parameters") or {}).get("properties") or {}
        arguments = {
            m["key"].strip(): _glm_value(m["value"], properties.get(m["key"].strip()))
            for m in _GLM_ARGUMENT.finditer("<arg_key>" + rest if rest else "")
        }
        calls.append(ToolCall(name, _dumps(arguments)))
    return content, calls


def _glm_value(raw: str, schema: Any) -> Any:
    types = _types(schema)
    if not types or types <= {"string"}:
        return raw
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return raw
    return value if any(_IS_TYPE[t](value) for t in types if t in _IS_TYPE) else raw


def _types(schema: Any) -> set[str]:
    """The JSON types a parameter schema allows: `type` (a name or a list), `enum` values, any/one/allOf members."""
    if not isinstance(schema, Mapping):
        return set()
    declared = schema.get("type")
    types = {declared} if isinstance(declared, str) else set(declared or ())
    for value in schema.get("enum") or ():
        types.add("string" if isinstance(value, str) else "boolean" if isinstance(value, bool) else "number")
    for key in ("anyOf", "oneOf", "allOf"):
        for member in schema.get(key) or ():
            types |= _types(member)
    return types


@dataclass(frozen=True)
class Format:
    name: str
    extract: Callable[..., Any]
    """(text, tools) -> (content, calls); harmony's parses the whole turn, reasoning included."""
    vllm_tool_parser: str
    vllm_reasoning_parser: str | None
    """The reasoning parser for this format's reasoning markers (used when the template has them)."""


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format("hermes", hermes, "hermes", "qwen3"),
        Format("llama3_json", llama3_json, "llama3_json", None),
        Format("mistral", mistral, "mistral", "mistral"),
        Format("harmony", harmony, "openai", "openai_gptoss"),
        Format("deepseek_v3", deepseek_v3, "deepseek_v3", "deepseek_r1"),
        Format("deepseek_v31", deepseek_v31, "deepseek_v31", "deepseek_v3"),
        Format("kimi_k2", kimi_k2, "kimi_k2", "kimi_k2"),
        Format("glm", glm, "glm45", "glm45"),
    )
}


def parse_turn(
    format_name: str,
    text: str,
    tools: Tools | None = None,
    *,
    reasoning: str | None = None,
    reasoning_open: bool = False,
) -> ParsedTurn:
    """A model's raw generation (special tokens kept, end-of-turn token left out) read as the endpoint should return
    it. `reasoning`: the reasoning markers (`think`, `mistral_think`) or None; `reasoning_open`: the generation prompt
    opened the reasoning. With `tools`, each call must name one of them.

    Raises:
        MalformedToolCall, EmptyArguments, UnknownTool (all ToolCallError): a call that cannot be used.
    """
    if format_name not in FORMATS:
        raise UnknownFormat(f"unknown tool-call format {format_name!r}", f"known formats: {', '.join(FORMATS)}")
    fmt = FORMATS[format_name]
    if fmt.name == "harmony":
        turn = harmony(text)
    else:
        thought, rest = split_reasoning(text, reasoning, open_at_start=reasoning_open)
        content, calls = fmt.extract(rest, tools or ())
        turn = make_turn(content, thought, calls)
    for index, call in enumerate(turn.tool_calls):
        if tools is not None:
            find_tool(tools, call.name, index)
        decode_arguments(call, index)
    return turn
