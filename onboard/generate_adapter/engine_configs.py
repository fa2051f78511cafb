"""vLLM and SGLang launch arguments from a ModelProfile's memory plan: tensor parallel degree, max model length,
dtype, KV-cache dtype, and reasoning / tool-call parsers where the family has known ones."""

from __future__ import annotations

from dataclasses import dataclass

from onboard.profile import ModelProfile

# model_type -> {engine: (reasoning parser, tool-call parser)}. Only families whose parsers are known; others get
# none (and a note), never a guess.
PARSERS: dict[str, dict[str, tuple[str | None, str | None]]] = {
    "qwen3": {"vllm": ("qwen3", "hermes"), "sglang": ("qwen3", "qwen25")},
    "qwen3_moe": {"vllm": ("qwen3", "hermes"), "sglang": ("qwen3", "qwen25")},
    "qwen2": {"vllm": (None, "hermes"), "sglang": (None, "qwen25")},
    "qwen2_moe": {"vllm": (None, "hermes"), "sglang": (None, "qwen25")},
    "deepseek_v3": {"vllm": ("deepseek_r1", "deepseek_v3"), "sglang": ("deepseek-r1", "deepseekv3")},
    "gpt_oss": {"vllm": ("openai_gptoss", "openai"), "sglang": ("gpt-oss", "gpt-oss")},
    "llama": {"vllm": (None, "llama3_json"), "sglang": (None, "llama3")},
    "mistral": {"vllm": (None, "mistral"), "sglang": (None, "mistral")},
    "mixtral": {"vllm": (None, "mistral"), "sglang": (None, "mistral")},
    "granite": {"vllm": ("granite", "granite")},
    "glm4": {"vllm": (None, "glm45"), "sglang": (None, "glm45")},
    "smollm3": {"vllm": (None, "hermes")},
    "ernie4_5": {"vllm": (None, "ernie45")},
}
# Profile KV dtype -> engine flag value ("auto": the model dtype).
KV_DTYPES = {"bfloat16": "auto", "float16": "auto", "float32": "auto", "auto": "auto", "fp8": "fp8",
             "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2"}  # fmt: skip


@dataclass(frozen=True)
class EngineConfig:
    engine: str
    """vllm | sglang"""
    argv: tuple[str, ...]
    notes: tuple[str, ...] = ()


def engine_config(profile: ModelProfile, engine: str) -> EngineConfig:
    """`vllm serve` or `python -m sglang.launch_server` arguments, with notes on what they could not decide."""
    notes: list[str] = []
    memory, tp = profile.memory, 1
    if memory is not None and memory.target is not None:
        tp = memory.target.recommended_tensor_parallel or memory.target.count
        if memory.target.fits is None:
            notes.append(f"weight bytes unknown: TP {tp} is the GPU count, not a sizing")
        elif not memory.target.fits:
            notes.append(f"the weights do not fit on {memory.target.count}x {memory.target.gpu}; TP {tp} is a floor")
    else:
        notes.append("no --target given to inspect: tensor parallel 1 (re-inspect with --target to size it)")
    if not any(f.endswith(("chat_template.jinja", "tokenizer_config.json")) for f in profile.files):
        notes.append("no chat template file in the checkpoint: pass --chat-template explicitly")
    vllm = engine == "vllm"
    if vllm:
        argv = ["vllm", "serve", profile.source, "--tensor-parallel-size", str(tp)]
    else:
        argv = ["python", "-m", "sglang.launch_server", "--model-path", profile.source, "--tp", str(tp)]
    dtype = profile.config_dtype if profile.config_dtype in ("bfloat16", "float16", "float32") else "auto"
    argv += ["--dtype", dtype]
    max_len = memory.max_model_len if memory is not None else None
    argv += ["--max-model-len" if vllm else "--context-length", str(max_len)] if max_len else []
    argv += ["--kv-cache-dtype", KV_DTYPES.get(memory.kv_dtype if memory is not None else "auto", "auto")]
    reasoning, tools = PARSERS.get(profile.model_type, {}).get(engine, (None, None))
    argv += ["--reasoning-parser", reasoning] if reasoning else []
    argv += [*(["--enable-auto-tool-choice"] if vllm else []), "--tool-call-parser", tools] if tools else []
    if profile.remote_code is not None:
        argv.append("--trust-remote-code")
        notes += ["the repo ships code (auto_map): review it before trusting it"] if vllm else []
    if not tools:
        notes.append(f"no known {'vLLM' if vllm else 'SGLang'} tool-call parser for {profile.model_type}")
    if profile.multimodal and vllm:
        notes.append(
            f"a multimodal wrapper ({', '.join(profile.multimodal)} tower): onboard verifies its language model "
            "on text; add --language-model-only to serve that alone (without it the towers are served too, "
            "unverified)"
        )
    return EngineConfig(engine, tuple(argv), tuple(notes))


def engine_configs(profile: ModelProfile) -> tuple[EngineConfig, ...]:
    return engine_config(profile, "vllm"), engine_config(profile, "sglang")
