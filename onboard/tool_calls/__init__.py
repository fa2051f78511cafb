"""Tool calls and reasoning as a model writes them (`formats`, `reasoning`, recognised from the chat template by
`detect`), turned into what an OpenAI-compatible endpoint returns (`turn`), checked against the offered tools
(`arguments`) and against vLLM's own parsers (`vllm_parsers`); `suite` renders the conformance conversations."""
