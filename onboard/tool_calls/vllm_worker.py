"""vLLM's own tool-call and reasoning parsers run on raw model text, as a script in vLLM's virtualenv (it imports
nothing of onboard): request JSON on stdin ({"tokenizer", "tiktoken_dir", "jobs": [vllm_parsers.ParserJob]}), answer
JSON on stdout ({"tool_parsers", "reasoning_parsers", "results": [{"id", "tool_parser", "reasoning_parser", "full",
"deltas", "error"}]}).

Each job parses one text the way the OpenAI server does: the parser class `ParserManager.get_parser` composes, its
`adjust_request` applied (it decides whether special tokens stay in the text); `parse` for the full text, and the
tokens fed one at a time to `parse_delta` as the server's detokenizer sends them. A parser named `*` stands for every
registered one. Harmony parsers read o200k_harmony ids (`tiktoken_dir`: the folder of `o200k_base.tiktoken`).
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any

HARMONY_TOOL_PARSER, HARMONY_REASONING_PARSER = "openai", "openai_gptoss"


class _Tokens:
    """The model's tokenizer, or o200k_harmony for harmony parsers."""

    def __init__(self, tokenizer: Any, harmony: Any = None) -> None:
        self.tokenizer, self.harmony = tokenizer, harmony

    def encode(self, text: str) -> list[int]:
        if self.harmony is not None:
            return list(self.harmony.encode(text, allowed_special="all"))
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids: list[int], skip_special: bool) -> str:
        if self.harmony is not None:
            return self.harmony.decode(ids)
        return self.tokenizer.decode(ids, skip_special_tokens=skip_special, clean_up_tokenization_spaces=False)


def _message(reasoning: str | None, content: str | None, calls: list[Any] | None) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": content,
        "reasoning_content": reasoning,
        "tool_calls": [
            {"type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls or []
        ],
    }


def _request(job: dict[str, Any]) -> Any:
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

    return ChatCompletionRequest(
        model="m",
        messages=[{"role": "user", "content": "-"}],
        tools=job.get("tools") or None,
        tool_choice="auto" if job.get("tools") else "none",
        include_reasoning=True,
        chat_template_kwargs=job.get("chat_template_kwargs") or None,
    )


def _tokenizer(path: str, extra: list[str], cache: dict[tuple[str, ...], Any]) -> Any:
    from transformers import AutoTokenizer

    key = tuple(extra)
    if key not in cache:
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=False)
        missing = [t for t in extra if t not in tokenizer.get_vocab()]
        if missing:
            tokenizer.add_tokens(missing)
        cache[key] = tokenizer
    return cache[key]


def _parse(job: dict[str, Any], tool_parser: str | None, reasoning_parser: str | None, env: dict[str, Any]) -> dict:
    from vllm.parser.parser_manager import ParserManager

    tokenizer = _tokenizer(env["path"], job.get("extra_tokens") or [], env["tokenizers"])
    harmony = tool_parser == HARMONY_TOOL_PARSER or reasoning_parser == HARMONY_REASONING_PARSER
    if harmony and env["harmony"] is None:
        raise RuntimeError("harmony parsers need o200k_harmony: pass tiktoken_dir (the folder of o200k_base.tiktoken)")
    tokens = _Tokens(tokenizer, env["harmony"] if harmony else None)
    parser_cls = ParserManager.get_parser(
        tool_parser_name=tool_parser,
        reasoning_parser_name=reasoning_parser,
        enable_auto_tools=True,
        is_harmony=harmony,
        tokenizer=tokenizer,
    )
    if parser_cls is None:
        raise RuntimeError("no parser configured")
    kwargs = {"chat_template_kwargs": job.get("chat_template_kwargs") or {}}
    request = _request(job)
    parser = parser_cls(tokenizer, request.tools, **kwargs)
    request = parser.adjust_request(request)
    skip = bool(request.skip_special_tokens)
    ids = tokens.encode(job["text"])
    text = tokens.decode(ids, skip)
    reasoning, content, calls = parser.parse(text, request, enable_auto_tools=True, model_output_token_ids=ids)
    full = _message(reasoning, content, calls)

    parser = parser_cls(tokenizer, request.tools, **kwargs)
    # The server always passes the prompt's ids (without them the stream never leaves its reasoning phase); a
    # prompt without reasoning markers stands in when none is given.
    prompt_ids = tokens.encode(job["prompt"]) if job.get("prompt") else []
    deltas, pending, sent = [], [], ""
    for i, token in enumerate(ids):
        pending.append(token)
        last = i == len(ids) - 1
        upto = tokens.decode(ids[: i + 1], skip)
        if upto.endswith("\ufffd") and not last:
            continue  # inside a UTF-8 character: the server's detokenizer waits for the rest of it
        delta = parser.parse_delta(upto[len(sent) :], pending, request, prompt_token_ids=prompt_ids, finished=last)
        sent, pending = upto, []
        if delta is not None:
            deltas.append(delta.model_dump(exclude_none=True))
    return {"full": full, "deltas": deltas}


def _names(value: str | None, registered: list[str]) -> list[str | None]:
    return list(registered) if value == "*" else [value]


def main() -> None:
    answer, sys.stdout = sys.stdout, sys.stderr  # vLLM's logger writes to stdout: keep it off the answer
    request = json.load(sys.stdin)
    if request.get("tiktoken_dir"):
        os.environ["TIKTOKEN_ENCODINGS_BASE"] = request["tiktoken_dir"]
    from vllm.reasoning import ReasoningParserManager
    from vllm.tool_parsers import ToolParserManager

    harmony = None
    if request.get("tiktoken_dir"):
        from openai_harmony import HarmonyEncodingName, load_harmony_encoding

        harmony = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
    env = {"path": request["tokenizer"], "tokenizers": {}, "harmony": harmony}
    tool_parsers, reasoning_parsers = ToolParserManager.list_registered(), ReasoningParserManager.list_registered()
    results = []
    for job in request["jobs"]:
        for tool_parser in _names(job.get("tool_parser"), tool_parsers):
            for reasoning_parser in _names(job.get("reasoning_parser"), reasoning_parsers):
                row: dict[str, Any] = {
                    "id": job["id"],
                    "tool_parser": tool_parser,
                    "reasoning_parser": reasoning_parser,
                    "full": None,
                    "deltas": None,
                    "error": None,
                }
                try:
                    row.update(_parse(job, tool_parser, reasoning_parser, env))
                except Exception as exc:  # a parser that refuses this tokenizer or text: reported, the rest go on
                    where = traceback.extract_tb(exc.__traceback__)[-1]
                    row["error"] = f"{type(exc).__name__}: {exc} ({os.path.basename(where.filename)}:{where.lineno})"
                results.append(row)
    out = {"tool_parsers": tool_parsers, "reasoning_parsers": reasoning_parsers, "results": results}
    answer.write(json.dumps(out, ensure_ascii=False))


if __name__ == "__main__":
    main()
