"""Tool calls and reasoning as a model writes them, turned into what an OpenAI-compatible endpoint returns.

- `turn`: ToolCall / ParsedTurn, the OpenAI-style result every parser returns, and `diff_turns` between two of them.
- `arguments`: a call's arguments checked (JSON object, tool offered, valid against the tool's schema).
- `formats/`: one parser per native tool-call format (hermes, llama3_json, mistral, harmony, deepseek_v3,
  deepseek_v31, kimi_k2, glm); `formats.parse_turn` runs one with the reasoning split.
- `reasoning`: `<think>` / `[THINK]` reasoning split, and whether a generation prompt leaves reasoning open.
- `detect`: a chat template's tool-call format and reasoning markers, with the evidence found in it.
- `stream`: OpenAI-style streaming deltas reassembled into a ParsedTurn.
- `suite`: the conformance conversations (tools, calls expected) rendered through a model's chat template.
- `vllm_parsers` (runs `vllm_worker` in vLLM's own virtualenv): vLLM's tool and reasoning parsers on raw text,
  non-streaming and streamed token by token, and which of them reproduce an expected parse (parser advice).
"""
