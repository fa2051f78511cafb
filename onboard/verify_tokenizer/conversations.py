"""The fixed conversations every chat template is rendered with (in apply_chat_template's context: messages, tools,
documents, add_generation_prompt and the special-token strings), and what the renders tell us."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from onboard.findings import Finding, error, info, warning
from onboard.verify_tokenizer.render import ARGUMENTS_AS_TEXT_HINT, joins_arguments_as_text, system_dropped
from onboard.verify_tokenizer.sandbox import render_many
from onboard.verify_tokenizer.subject import Subject

SYSTEM = "You are a helpful assistant."
ASSISTANT_MARK = "Hi there, I am the assistant."
TOOL_RESULT = '{"temperature_c": 22, "sky": "clear"}'
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}

CONVERSATIONS: dict[str, dict[str, Any]] = {
    "single_turn": {"messages": [{"role": "user", "content": "Hello, who are you?"}]},
    "system_multi_turn": {"messages": [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": ASSISTANT_MARK},
        {"role": "user", "content": "What can you do?"},
    ]},
    "padded_assistant": {"messages": [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "   I am an assistant   "},
        {"role": "user", "content": "Another question"},
    ]},
    "tools": {"tools": [WEATHER_TOOL], "messages": [
        {"role": "user", "content": "What is the weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": TOOL_RESULT},
    ]},
}  # fmt: skip


@dataclass(frozen=True)
class Render:
    name: str
    add_generation_prompt: bool
    extra: dict[str, Any]
    ok: bool
    text: str | None
    error_kind: str | None
    message: str | None
    read_clock: bool
    bos_count: int | None = None
    """BOS tokens in the render tokenized with add_special_tokens=False."""


@dataclass(frozen=True)
class TemplateCheck:
    source_file: str | None
    renders: list[Render]
    generation_prompt: str | None
    """What add_generation_prompt=True appends (None when it is not a suffix of the plain render)."""
    end_of_turn: list[int]
    """Ids the template puts right after an assistant message (candidates for the stop set)."""


def plan(template: str) -> list[tuple[str, bool, dict[str, Any]]]:
    """(conversation, add_generation_prompt, extra kwargs) to render."""
    out = [(name, True, {}) for name in CONVERSATIONS]
    out.append(("single_turn", False, {}))
    if "enable_thinking" in template:
        out += [
            ("system_multi_turn", True, {"enable_thinking": True}),
            ("system_multi_turn", True, {"enable_thinking": False}),
        ]
    return out


def context_for(
    name: str, add_generation_prompt: bool, extra: dict[str, Any], special: dict[str, str]
) -> dict[str, Any]:
    conv = CONVERSATIONS[name]
    messages = [{k: v for k, v in m.items() if v is not None} for m in conv["messages"]]
    return {
        **special,
        "messages": messages,
        "tools": conv.get("tools"),
        "documents": None,
        "add_generation_prompt": add_generation_prompt,
        **extra,
    }


def special_strings(subject: Subject | None, declared: dict[str, Any] | None = None) -> dict[str, str]:
    """bos_token, eos_token, …: the tokenizer's, or (no tokenizer built) the strings tokenizer_config.json declares."""
    if subject is not None:
        return {k: v for k, v in (subject.hf.special_tokens_map or {}).items() if isinstance(v, str)}
    out = {}
    for key, value in (declared or {}).items():
        text = value.get("content") if isinstance(value, dict) else value
        if key.endswith("_token") and isinstance(text, str):
            out[key] = text
    return out


def check_template(
    template: str, source_file: str | None, subject: Subject | None, declared: dict[str, Any] | None = None
) -> tuple[TemplateCheck, list[Finding]]:
    """Render the fixed conversations. Without a tokenizer (`subject` None: its files are missing or pointers) the
    renders, role handling and clock checks still run on the declared special-token strings; what needs token ids
    (BOS count, end-of-turn ids) is not computed."""
    jobs = plan(template)
    special = special_strings(subject, declared)
    contexts = [context_for(n, agp, extra, special) for n, agp, extra in jobs]
    results = render_many(template, contexts)
    bos = subject.hf.bos_token_id if subject is not None else None
    renders = []
    for (name, agp, extra), result in zip(jobs, results):
        count = None
        if result.ok and bos is not None and subject is not None:
            count = subject.encode(result.text or "", add_special_tokens=False).count(bos)
        renders.append(Render(name, agp, extra, **dataclasses.asdict(result), bos_count=count))
    by_key = {(r.name, r.add_generation_prompt, tuple(sorted(r.extra.items()))): r for r in renders}
    with_prompt, without = by_key[("single_turn", True, ())], by_key[("single_turn", False, ())]
    gen_prompt = None
    if with_prompt.ok and without.ok and (with_prompt.text or "").startswith(without.text or ""):
        gen_prompt = (with_prompt.text or "")[len(without.text or "") :]
    end_of_turn = _end_of_turn(by_key[("system_multi_turn", True, ())], subject) if subject is not None else []
    findings = _findings(renders, contexts, gen_prompt, subject, source_file)
    return TemplateCheck(source_file, renders, gen_prompt, end_of_turn), findings


def _end_of_turn(render: Render, subject: Subject) -> list[int]:
    if not render.ok or ASSISTANT_MARK not in (render.text or ""):
        return []
    after = (render.text or "").split(ASSISTANT_MARK, 1)[1]
    ids = subject.encode(after, add_special_tokens=False)[:2]
    added = getattr(subject.hf, "added_tokens_decoder", {})
    return [i for i in ids[:1] if i in added]


def _findings(
    renders: list[Render],
    contexts: list[dict[str, Any]],
    gen_prompt: str | None,
    subject: Subject | None,
    file: str | None,
) -> list[Finding]:
    out: list[Finding] = []
    for render in renders:
        if render.error_kind in ("security", "timeout", "output-limit", "syntax", "crash"):
            out.append(
                error(
                    "template-unusable",
                    f"chat template {render.error_kind} on {render.name}: {render.message}",
                    "the template cannot be served safely; fix or replace it",
                    file=file,
                )
            )
            return out
    sys_render = next(r for r in renders if r.name == "system_multi_turn" and not r.extra)
    sys_context = contexts[renders.index(sys_render)]
    if not sys_render.ok:
        out.append(
            warning(
                "template-rejects-system",
                f"system role rejected: the template raised: {sys_render.message}",
                "clients that send a system message get an error; fold it into the first user turn "
                "(llama.cpp's system-merge polyfill) or fix the template",
                file=file,
            )
        )
    elif system_dropped(sys_context, sys_render.text):
        out.append(
            warning(
                "template-rejects-system",
                "system role rejected: the template drops the system message",
                "the system prompt silently disappears; document it or fold it into the first user turn",
                file=file,
            )
        )
    tools = next(r for r in renders if r.name == "tools")
    if not tools.ok:
        as_text = joins_arguments_as_text(tools.message, contexts[renders.index(tools)])
        hint = (
            "tool-calling conversations fail in vLLM: " + ARGUMENTS_AS_TEXT_HINT
            if as_text
            else "tool-calling requests fail; fix the template or declare the model tool-less"
        )
        out.append(
            warning(
                "template-rejects-tools",
                f"the template raised on tools / tool messages: {tools.message}",
                hint,
                file=file,
            )
        )
    elif TOOL_RESULT not in (tools.text or ""):
        out.append(info("template-ignores-tools", "the template renders no tool result (no tool support)", file=file))
    failed = [r for r in renders if not r.ok and r.name not in ("system_multi_turn", "tools")]
    for render in failed:
        out.append(
            warning("template-rejects-conversation", f"{render.name}: the template raised: {render.message}", file=file)
        )
    if any(r.read_clock for r in renders):
        out.append(
            warning(
                "template-reads-clock",
                "the template reads the clock (strftime_now): its output changes "
                "with the date, so prompts (and prefix caches, goldens) differ from day to day",
                "pin the date in the request (e.g. date_string) or accept daily drift; goldens use a frozen clock",
                file=file,
            )
        )
    out += _bos_findings(renders, subject, file) if subject is not None else []
    if gen_prompt is not None:
        out.append(info("generation-prompt", f"add_generation_prompt appends {gen_prompt!r}", file=file))
    return out


def _bos_findings(renders: list[Render], subject: Subject, file: str | None) -> list[Finding]:
    counted = [r for r in renders if r.bos_count is not None]
    worst = max(counted, key=lambda r: r.bos_count or 0, default=None)
    if worst is None:
        return []
    bos = subject.hf.bos_token
    if (worst.bos_count or 0) > 1:
        return [
            error(
                "double-bos",
                f"{worst.name}: the rendered prompt itself contains {worst.bos_count} BOS tokens ({bos})",
                "emit bos_token once, at the start of the conversation",
                file=file,
            )
        ]
    if worst.bos_count == 1 and subject.observed_insertion()[0]:
        return [
            warning(
                "double-bos",
                f"the template emits {bos} and the tokenizer adds another with add_special_tokens=True: "
                "engines that tokenize the prompt that way start with 2 BOS",
                "tokenize rendered prompts with add_special_tokens=False (or drop bos_token from the template)",
                file=file,
            )
        ]
    return []
