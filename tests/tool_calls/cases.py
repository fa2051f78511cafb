"""Raw model texts in each native tool-call format, with the turn they mean: written here from the calls by one
small writer per format (what the model's chat template renders for a call), so our parsers and vLLM's can both
be run on them (test_formats.py, test_vllm_agreement.py).

Per format: a single call, parallel calls (where the format has them), nested and unicode arguments, content
before a call (where the format keeps it), a turn without a call, and reasoning (where the format's models have it).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from onboard.tool_calls.turn import ParsedTurn, ToolCall

TOOLS: tuple[dict[str, Any], ...] = (
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather in a city",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "City name"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit"}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "create_event", "description": "Add an event to the calendar",
        "parameters": {"type": "object", "properties": {
            "title": {"type": "string", "description": "Title"},
            "when": {"type": "object", "description": "Date and time", "properties": {
                "date": {"type": "string"}, "time": {"type": "string"}}, "required": ["date"]},
            "attendees": {"type": "array", "items": {"type": "string"}, "description": "Names"},
            "minutes": {"type": "integer", "description": "Length"}},
            "required": ["title", "when"]}}},
)  # fmt: skip

Call = tuple[str, dict[str, Any]]
SINGLE: list[Call] = [("get_weather", {"city": "Paris"})]
PARALLEL: list[Call] = [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Tokyo", "unit": "celsius"})]
NESTED_UNICODE: list[Call] = [("create_event", {"title": "Grüße 🎉 «Team» 会议", "when": {"date": "2025-03-14",
                               "time": "10:00"}, "attendees": ["Zoë", "李雷"], "minutes": 30})]  # fmt: skip
ANSWER = "Hello! How can I help you today?"
PREAMBLE = "Let me check that."
THOUGHT = "The user wants the weather in Paris; I call get_weather."


def _j(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def hermes(calls: list[Call]) -> str:
    return "\n".join(f'<tool_call>\n{{"name": "{n}", "arguments": {_j(a)}}}\n</tool_call>' for n, a in calls)


def llama3_json(calls: list[Call]) -> str:
    return "; ".join(f'{{"name": "{n}", "parameters": {_j(a)}}}' for n, a in calls)


def mistral_v3(calls: list[Call]) -> str:
    return "[TOOL_CALLS]" + _j([{"name": n, "arguments": a} for n, a in calls])


def mistral_v11(calls: list[Call]) -> str:
    return "".join(f"[TOOL_CALLS]{n}[ARGS]{_j(a)}" for n, a in calls)


def harmony(calls: list[Call]) -> str:
    """The generation after the prompt's `<|start|>assistant`; later messages open with it again."""
    return "<|start|>assistant".join(f"<|channel|>commentary to=functions.{n} <|constrain|>json<|message|>{_j(a)}"
                                     "<|call|>" for n, a in calls)  # fmt: skip


def deepseek_v3(calls: list[Call]) -> str:
    blocks = "\n".join(f"<｜tool▁call▁begin｜>function<｜tool▁sep｜>{n}\n```json\n{_j(a)}\n```<｜tool▁call▁end｜>"
                       for n, a in calls)  # fmt: skip
    return f"<｜tool▁calls▁begin｜>{blocks}<｜tool▁calls▁end｜>"


def deepseek_v31(calls: list[Call]) -> str:
    blocks = "".join(f"<｜tool▁call▁begin｜>{n}<｜tool▁sep｜>{_j(a)}<｜tool▁call▁end｜>" for n, a in calls)
    return f"<｜tool▁calls▁begin｜>{blocks}<｜tool▁calls▁end｜>"


def kimi_k2(calls: list[Call]) -> str:
    blocks = "".join(f"<|tool_call_begin|>functions.{n}:{i}<|tool_call_argument_begin|>{_j(a)}<|tool_call_end|>"
                     for i, (n, a) in enumerate(calls))  # fmt: skip
    return f"<|tool_calls_section_begin|>{blocks}<|tool_calls_section_end|>"


def glm(calls: list[Call]) -> str:
    def value(v: Any) -> str:
        return v if isinstance(v, str) else _j(v)

    return "".join(f"<tool_call>{n}\n" + "".join(f"<arg_key>{k}</arg_key>\n<arg_value>{value(v)}</arg_value>\n"
                                                 for k, v in a.items()) + "</tool_call>" for n, a in calls)  # fmt: skip


@dataclass(frozen=True)
class FormatCase:
    """How one format's texts are written and which vLLM parsers read them."""

    format: str
    writer: Callable[[list[Call]], str]
    vllm_tool_parser: str
    markers: tuple[str, ...]
    """Special tokens a model of this format has (added to the test tokenizer for vLLM's parsers)."""
    parallel: bool = True
    preamble: bool = True
    """Content before the calls is kept (Llama's format has no room for it)."""
    think: tuple[str, str] | None = None
    """(reasoning parser, reasoning style) for this format's reasoning models."""
    answer: Callable[[str], str] = str
    """How a plain answer is written (harmony puts it in the final channel)."""
    reasoning_text: Callable[[str], str] = lambda r: f"<think>\n{r}\n</think>\n\n"
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    open_prompt: str | None = None
    """The end of a generation prompt that opens the reasoning (DeepSeek R1 / V3.1 thinking, Qwen3 thinking-2507):
    the model's text then starts inside it."""


FORMAT_CASES = (
    FormatCase("hermes", hermes, "hermes", ("<tool_call>", "</tool_call>", "<think>", "</think>"),
               think=("qwen3", "think"), open_prompt="<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n"),
    FormatCase("llama3_json", llama3_json, "llama3_json", ("<|python_tag|>", "<|eom_id|>", "<|eot_id|>"),
               preamble=False),
    FormatCase("mistral", mistral_v3, "mistral", ("[TOOL_CALLS]",)),
    FormatCase("mistral", mistral_v11, "mistral", ("[TOOL_CALLS]", "[ARGS]", "[THINK]", "[/THINK]"),
               think=("mistral", "mistral_think"), reasoning_text=lambda r: f"[THINK]{r}[/THINK]"),
    FormatCase("harmony", harmony, "openai", (), parallel=False, preamble=False, think=("openai_gptoss", "harmony"),
               answer=lambda a: f"<|channel|>final<|message|>{a}<|return|>",
               reasoning_text=lambda r: f"<|channel|>analysis<|message|>{r}<|end|><|start|>assistant"),
    FormatCase("deepseek_v3", deepseek_v3, "deepseek_v3",
               ("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>",
                "<｜tool▁sep｜>", "<think>", "</think>"), think=("deepseek_r1", "think"),
               open_prompt="<｜User｜>Hi<｜Assistant｜><think>\n"),
    FormatCase("deepseek_v31", deepseek_v31, "deepseek_v31",
               ("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>",
                "<｜tool▁sep｜>", "<think>", "</think>"), think=("deepseek_v3", "think"),
               chat_template_kwargs={"thinking": True}, open_prompt="<｜User｜>Hi<｜Assistant｜><think>"),
    FormatCase("kimi_k2", kimi_k2, "kimi_k2",
               ("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
                "<|tool_call_end|>", "<|tool_call_argument_begin|>", "<think>", "</think>"), think=("kimi_k2", "think")),
    FormatCase("glm", glm, "glm45", ("<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>",
                                      "</arg_value>", "<think>", "</think>"), think=("glm45", "think")),
)  # fmt: skip


@dataclass(frozen=True)
class TextCase:
    id: str
    format: str
    text: str
    expected: ParsedTurn
    vllm_tool_parser: str
    vllm_reasoning_parser: str | None
    reasoning: str | None
    """Our reasoning style for parse_turn (None for harmony, which splits its own)."""
    markers: tuple[str, ...]
    chat_template_kwargs: dict[str, Any]
    prompt: str | None = None
    """The generation prompt, when the case needs it (one that opens the reasoning)."""


def _turn(calls: list[Call], content: str | None = None, reasoning: str | None = None) -> ParsedTurn:
    return ParsedTurn(content, reasoning, tuple(ToolCall(n, _j(a)) for n, a in calls))


def text_cases() -> list[TextCase]:
    out = []
    for fc in FORMAT_CASES:
        variant = f"{fc.format}:{fc.writer.__name__}"
        texts: list[tuple[str, str, ParsedTurn, bool]] = [
            ("single", fc.writer(SINGLE), _turn(SINGLE), False),
            ("nested_unicode", fc.writer(NESTED_UNICODE), _turn(NESTED_UNICODE), False),
            ("no_call", fc.answer(ANSWER), _turn([], ANSWER), False),
        ]
        if fc.parallel:
            texts.append(("parallel", fc.writer(PARALLEL), _turn(PARALLEL), False))
        if fc.preamble:
            texts.append(("preamble", f"{PREAMBLE}\n\n{fc.writer(SINGLE)}", _turn(SINGLE, PREAMBLE), False))
        if fc.think:
            texts.append(("reasoning", fc.reasoning_text(THOUGHT) + fc.writer(SINGLE), _turn(SINGLE, None, THOUGHT),
                          True))  # fmt: skip
            texts.append(("reasoning_no_call", fc.reasoning_text(THOUGHT) + fc.answer(ANSWER),
                          _turn([], ANSWER, THOUGHT), True))  # fmt: skip
        prompts = {}
        if fc.open_prompt:
            texts.append(("reasoning_opened_by_prompt", f"{THOUGHT}\n</think>\n\n{fc.writer(SINGLE)}",
                          _turn(SINGLE, None, THOUGHT), True))  # fmt: skip
            prompts["reasoning_opened_by_prompt"] = fc.open_prompt
        for name, text, expected, thinks in texts:
            reasoning_parser = fc.think[0] if fc.think and (thinks or fc.format == "harmony") else None
            style = fc.think[1] if fc.think and thinks and fc.format != "harmony" else None
            out.append(TextCase(f"{variant}:{name}", fc.format, text, expected, fc.vllm_tool_parser, reasoning_parser,
                                style, fc.markers, fc.chat_template_kwargs if thinks else {}, prompts.get(name)))  # fmt: skip
    return out
