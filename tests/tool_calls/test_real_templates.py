"""Template recognition and the native-format parsers on the real chat templates in ../shared/data: each template
that onboard recognises renders a single call and parallel calls (nested and unicode arguments) in its own
format, and the recognised format's parser reads back exactly those calls.

How the assistant's text is cut from a render: the rendering of [user, assistant(tool_calls)] less the generation
prompt of [user] (less the reasoning opener or empty reasoning block a generation prompt adds: the model writes
after it), up to the first end-of-turn marker. Messages are tried in the shapes clients send (SHAPES): templates
accept different ones (Mistral's v3 templates escape the quotes of object arguments, DeepSeek R1's concatenate text
arguments, gpt-oss's refuse a null content).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from onboard.tool_calls.detect import recognise_format, recognise_reasoning
from onboard.tool_calls.formats import FORMATS, parse_turn
from onboard.tool_calls.reasoning import MARKERS
from onboard.tool_calls.turn import ToolCall
from onboard.verify_tokenizer.sandbox import render_many

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city", "parameters": {
        "type": "object", "required": ["city"], "properties": {
            "city": {"type": "string", "description": "City"}, "days": {"type": "integer", "description": "Days"}}}}},
    {"type": "function", "function": {"name": "create_event", "description": "Add an event", "parameters": {
        "type": "object", "required": ["title"], "properties": {
            "title": {"type": "string", "description": "Title"},
            "when": {"type": "object", "description": "Date and time"}}}}},
]  # fmt: skip
SINGLE = [("get_weather", {"city": "Köln", "days": 3})]
PARALLEL = [("get_weather", {"city": "東京"}), ("create_event", {"title": "Grüße «Team» 🎉", "when": {"date": "2025-03-14",
            "time": "10:00"}})]  # fmt: skip
ENDS = ("<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<EOS>", "<|end|>", "<|call|>", "<|return|>", "<｜end▁of▁sentence｜>",
        "<|user|>", "<|observation|>", "<|end_of_text|>", "</assistant>", "<sep>", "<|im_start|>")  # fmt: skip
HARMONY_ENDS = ("<|call|>", "<|return|>")  # <|end|> closes one harmony message of a turn, not the turn

EXPECTED = {  # file -> (format, reasoning markers): one or more real templates of each format, and look-alikes
    "llamacpp/templates/Qwen-Qwen3-0.6B.jinja": ("hermes", "think"),
    "llamacpp/templates/Qwen-Qwen2.5-7B-Instruct.jinja": ("hermes", None),
    "llamacpp/templates/NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja": ("hermes", None),
    "llamacpp/templates/Qwen3-Coder.jinja": (None, None),  # XML <function=...> calls: not a format onboard reads
    "llamacpp/templates/Qwen3.5-4B.jinja": (None, "think"),
    "llamacpp/templates/unsloth-Apriel-1.5.jinja": (None, None),  # a <tool_calls>[...] list
    "llamacpp/templates/meta-llama-Llama-3.1-8B-Instruct.jinja": ("llama3_json", None),
    "llamacpp/templates/meta-llama-Llama-3.3-70B-Instruct.jinja": ("llama3_json", None),
    "chat_templates/vllm/tool_chat_template_llama4_json.jinja": ("llama3_json", None),
    "chat_templates/vllm/tool_chat_template_llama3.2_pythonic.jinja": (None, None),
    "llamacpp/templates/mistralai-Mistral-Nemo-Instruct-2407.jinja": ("mistral", None),
    "llamacpp/templates/Mistral-Small-3.2-24B-Instruct-2506.jinja": ("mistral", None),
    "mistral/mistral-common/chat_templates/v13_think.jinja": ("mistral", "mistral_think"),
    "gpt-oss/gpt-oss-20b_hf-mirror/chat_template.jinja": ("harmony", None),
    "llamacpp/templates/openai-gpt-oss-120b.jinja": ("harmony", None),
    "deepseek/deepseek-r1_hf-mirror/tokenizer_config.json": ("deepseek_v3", None),
    "llamacpp/templates/deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": ("deepseek_v3", "think"),
    "llamacpp/templates/deepseek-ai-DeepSeek-V3.1.jinja": ("deepseek_v31", "think"),
    "llamacpp/templates/deepseek-ai-DeepSeek-V3.2.jinja": (None, "think"),  # DSML: not among the formats
    "llamacpp/templates/moonshotai-Kimi-K2.jinja": ("kimi_k2", None),
    "llamacpp/templates/Kimi-K2-Thinking.jinja": ("kimi_k2", "think"),
    "llamacpp/templates/GLM-4.6.jinja": ("glm", "think"),
    "llamacpp/templates/GLM-4.7-Flash.jinja": ("glm", "think"),
    "llamacpp/templates/google-gemma-4-31B-it.jinja": (None, None),
    "llamacpp/templates/CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja": (None, None),
}
UNRENDERABLE = {  # written for llama.cpp's minja, or broken with every message shape: transformers cannot render them
    "llamacpp/templates/Kimi-K2-Instruct.jinja": "access to attribute 'append' of 'list' is unsafe",
    "llamacpp/templates/Kimi-K2-Thinking.jinja": "access to attribute 'append' of 'list' is unsafe",
    "llamacpp/templates/llama-cpp-deepseek-r1.jinja": "generator is not JSON serializable",
}
NO_HISTORY_CALLS = {  # templates that describe the format to the model but never render an assistant's calls
    "chat_templates/vllm/tool_chat_template_glm4.jinja",
}
SINGLE_ONLY = {  # raise_exception on more than one call per turn
    "llamacpp/templates/meta-llama-Llama-3.1-8B-Instruct.jinja", "llamacpp/templates/meta-llama-Llama-3.2-3B-Instruct.jinja",
    "llamacpp/templates/meta-llama-Llama-3.3-70B-Instruct.jinja", "chat_templates/trl/llama3_1.jinja",
    "chat_templates/trl/llama3_2.jinja", "chat_templates/vllm/tool_chat_template_llama3.1_json.jinja",
    "chat_templates/vllm/tool_chat_template_llama3.2_json.jinja", "llama3/llama-3.2-3b-instruct_hf-mirror/tokenizer_config.json",
}  # fmt: skip
FIRST_CALL_ONLY = {  # harmony: one call per assistant message, and these render only a turn's first call
    "gpt-oss/gpt-oss-20b_hf-mirror/chat_template.jinja", "gpt-oss/ort-extensions/chat_template.jinja",
    "llamacpp/templates/openai-gpt-oss-120b.jinja", "chat_templates/trl/gptoss.jinja",
}


def templates(root: Path) -> Iterator[tuple[str, str]]:
    """(path under the data folder, template) for every chat template there: .jinja files and the chat_template of
    tokenizer_config.json / chat_template.json files."""
    for path in sorted(root.rglob("*")):
        name = str(path.relative_to(root))
        if path.suffix in (".jinja", ".jinja2"):
            yield name, path.read_text(encoding="utf-8", errors="replace")
        elif path.name in ("tokenizer_config.json", "chat_template.json"):
            value = json.loads(path.read_text(encoding="utf-8")).get("chat_template")
            if isinstance(value, str):
                yield name, value
            for entry in value if isinstance(value, list) else []:
                yield f"{name}#{entry['name']}", entry["template"]


SHAPES = (("", "object"), ("", "text"), (None, "object"), (None, "text"), ("", "flat"))
"""(content, arguments) of the assistant's message: arguments as a JSON object or as JSON text in OpenAI's
`function`, or `flat` (calls without OpenAI's `function` wrapper, as an older gpt-oss template reads them)."""


def _messages(calls: list[tuple[str, dict[str, Any]]], content: str | None, shape: str) -> list[dict[str, Any]]:
    def one(i: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if shape == "flat":
            return {"id": f"abcDEF{i:03d}", "name": name, "arguments": arguments}
        value = json.dumps(arguments, ensure_ascii=False) if shape == "text" else arguments
        return {"id": f"abcDEF{i:03d}", "type": "function", "function": {"name": name, "arguments": value}}

    tool_calls = [one(i, n, a) for i, (n, a) in enumerate(calls)]
    return [{"role": "user", "content": "Please."}, {"role": "assistant", "content": content, "tool_calls": tool_calls}]


def _generation(prompt: str, full: str, style: str | None, ends: tuple[str, ...] = ENDS) -> str:
    """The assistant's text in `full`: after the generation prompt (less what it adds to open reasoning), up to the
    first end-of-turn marker. Where a template renders the generation prompt otherwise than the history (other
    whitespace in vLLM's DeepSeek examples, the system prompt moved before the last user turn in its Mistral one),
    the text starts where the two renders part: it then holds some of the prompt as content, never a call."""
    base = prompt.rstrip()
    if style:
        start, end = MARKERS[style]
        if base.endswith(end) and base[: -len(end)].rstrip().endswith(start):
            base = base[: -len(end)].rstrip()
        base = base.removesuffix(start)
    text = full[len(os.path.commonprefix([base, full])) :]
    cut = min([at for marker in ends if (at := text.find(marker)) > 0] or [len(text)])
    return text[:cut]


def round_trips(template: str, fmt: str, style: str | None, kinds: dict[str, list]) -> dict[str, str]:
    """Per kind of calls: 'ok' when some message shape renders them and `fmt`'s parser reads them back, else why not
    (each shape's render failure or misread). One sandboxed render process per template."""
    contexts = []
    for calls in kinds.values():
        for content, shape in SHAPES:
            messages = _messages(calls, content, shape)
            base = {"tools": TOOLS, "bos_token": "<BOS>", "eos_token": "<EOS>"}
            contexts += [dict(base, messages=messages[:1], add_generation_prompt=True),
                         dict(base, messages=messages, add_generation_prompt=False)]  # fmt: skip
    renders = iter(render_many(template, contexts))
    return {kind: _read_back(fmt, style, calls, [(next(renders), next(renders)) for _ in SHAPES])
            for kind, calls in kinds.items()}  # fmt: skip


def _read_back(fmt: str, style: str | None, calls: list, renders: list) -> str:
    tried = []
    for prompt, full in renders:
        if not (prompt.ok and full.ok):
            tried.append(f"render: {(prompt.message if not prompt.ok else full.message)}")
            continue
        harmony = fmt == "harmony"
        text = _generation(prompt.text, full.text, None if harmony else style, HARMONY_ENDS if harmony else ENDS)
        if "&#34;" in text:
            tried.append("escaped quotes")
            continue
        try:
            turn = parse_turn(fmt, text, TOOLS, reasoning=style if fmt != "harmony" else None)
        except Exception as exc:
            tried.append(f"{type(exc).__name__}: {exc}")
            continue
        if [(c.name, json.loads(c.arguments)) for c in turn.tool_calls] == calls:
            return "ok"
        tried.append(f"read {turn.tool_calls} from {text[:200]!r}")
    return " | ".join(tried)


def test_recognition_of_named_templates(shared_data: Path) -> None:
    found = dict(templates(shared_data))
    for name, (fmt, style) in EXPECTED.items():
        assert name in found, name
        got_format, got_style = recognise_format(found[name]), recognise_reasoning(found[name])
        assert (got_format.name if got_format else None) == fmt, name
        assert (got_style.name if got_style else None) == style, name
        if got_format:
            assert got_format.evidence and got_format.evidence.replace("…", "")[:20] in found[name], name


def test_every_recognised_real_template_renders_calls_our_parser_reads_back(shared_data: Path) -> None:
    results: dict[str, dict[str, str]] = {}
    for name, template in templates(shared_data):
        fmt = recognise_format(template)
        if fmt is None:
            continue
        style = recognise_reasoning(template)
        kinds = {"single": SINGLE, "parallel": PARALLEL}
        results[name] = {"format": fmt.name} | round_trips(template, fmt.name, style.name if style else None, kinds)
    unrenderable = {n for n, r in results.items() if r["single"].startswith("render") and "render" in r["parallel"]}
    assert {n: results[n]["single"] for n in unrenderable if n not in UNRENDERABLE} == {}
    assert all(UNRENDERABLE[n] in results[n]["single"] for n in UNRENDERABLE), {n: results[n] for n in UNRENDERABLE}
    checked = {n: r for n, r in results.items() if n not in UNRENDERABLE and n not in NO_HISTORY_CALLS}
    assert {n: r["single"] for n, r in checked.items() if r["single"] != "ok"} == {}
    not_read = {n for n, r in checked.items() if r["parallel"] != "ok"}
    assert not_read == (SINGLE_ONLY | FIRST_CALL_ONLY) & set(checked), {n: checked[n]["parallel"] for n in not_read}
    assert all("only supports single tool-calls" in checked[n]["parallel"] for n in SINGLE_ONLY)
    first = f"read ({ToolCall(PARALLEL[0][0], json.dumps(PARALLEL[0][1], ensure_ascii=False))},) from"
    assert all(first in checked[n]["parallel"] for n in FIRST_CALL_ONLY), first
    per_format = {f: sum(r["format"] == f and r["single"] == "ok" for r in checked.values()) for f in FORMATS}
    assert all(per_format.values()), per_format  # every format is read back from at least one real template
    assert len(checked) >= 60, len(checked)


def test_templates_without_history_calls_still_describe_the_recognised_format(shared_data: Path) -> None:
    found = dict(templates(shared_data))
    for name in NO_HISTORY_CALLS:
        assert recognise_format(found[name]).name == "glm"
        assert "<tool_call>function_name\n<arg_key>parameter_name</arg_key>" in found[name]


@pytest.mark.parametrize("kind", ["single", "parallel"])
def test_the_round_trip_catches_a_misread_format(shared_data: Path, kind: str) -> None:
    """The check can fail: Qwen's template read as Llama's format or GLM's gives back no calls."""
    template = dict(templates(shared_data))["llamacpp/templates/Qwen-Qwen2.5-7B-Instruct.jinja"]
    kinds = {kind: SINGLE if kind == "single" else PARALLEL}
    assert round_trips(template, "hermes", None, kinds) == {kind: "ok"}
    assert round_trips(template, "glm", None, kinds)[kind] != "ok"
    assert round_trips(template, "llama3_json", None, kinds)[kind] != "ok"
