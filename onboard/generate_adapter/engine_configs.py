"""vLLM and SGLang launch arguments from a ModelProfile's memory plan: tensor parallel degree, max model length,
dtype, KV-cache dtype, chat template and reasoning / tool-call parsers where the family has known ones."""

from __future__ import annotations

from dataclasses import dataclass

from onboard.profile import ModelProfile

# model_type -> (reasoning parser, tool-call parser), per engine. Only families whose parsers are known; others get
# none (and a note), never a guess.
VLLM_PARSERS: dict[str, tuple[str | None, str | None]] = {
    "qwen3": ("qwen3", "hermes"),
    "qwen3_moe": ("qwen3", "hermes"),
    "qwen2": (None, "hermes"),
    "qwen2_moe": (None, "hermes"),
    "deepseek_v3": ("deepseek_r1", "deepseek_v3"),
    "gpt_oss": ("openai_gptoss", "openai"),
    "llama": (None, "llama3_json"),
    "mistral": (None, "mistral"),
    "mixtral": (None, "mistral"),
    "granite": ("granite", "granite"),
    "glm4": (None, "glm45"),
    "smollm3": (None, "hermes"),
    "ernie4_5": (None, "ernie45"),
}
SGLANG_PARSERS: dict[str, tuple[str | None, str | None]] = {
    "qwen3": ("qwen3", "qwen25"),
    "qwen3_moe": ("qwen3", "qwen25"),
    "qwen2": (None, "qwen25"),
    "qwen2_moe": (None, "qwen25"),
    "deepseek_v3": ("deepseek-r1", "deepseekv3"),
    "gpt_oss": ("gpt-oss", "gpt-oss"),
    "llama": (None, "llama3"),
    "mistral": (None, "mistral"),
    "mixtral": (None, "mistral"),
    "glm4": (None, "glm45"),
}
# Profile KV dtype -> engine flag value ("auto": the model dtype).
KV_DTYPES = {"bfloat16": "auto", "float16": "auto", "float32": "auto", "auto": "auto", "fp8": "fp8",
             "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2"}  # fmt: skip
DTYPES = {"bfloat16": "bfloat16", "float16": "float16", "float32": "float32"}


@dataclass(frozen=True)
class EngineConfig:
    engine: str
    """vllm | sglang"""
    argv: tuple[str, ...]
    notes: tuple[str, ...] = ()


def _common(profile: ModelProfile) -> tuple[int, int | None, str, str, list[str]]:
    notes: list[str] = []
    memory, tp = profile.memory, 1
    if memory is not None and memory.target is not None:
        tp = memory.target.recommended_tensor_parallel or memory.target.count
        if memory.target.fits is None:
            notes.append(f"weight bytes unknown: TP {tp} is the GPU count, not a sizing")
        elif not memory.target.fits:
            notes.append(f"the weights do not fit on {memory.target.count}x {memory.target.gpu}; TP {tp} is a floor")
    elif memory is None or memory.target is None:
        notes.append("no --target given to inspect: tensor parallel 1 (re-inspect with --target to size it)")
    max_len = memory.max_model_len if memory is not None else None
    dtype = DTYPES.get(profile.config_dtype or "", "auto")
    kv = KV_DTYPES.get(memory.kv_dtype if memory is not None else "auto", "auto")
    if not any(f.endswith(("chat_template.jinja", "tokenizer_config.json")) for f in profile.files):
        notes.append("no chat template file in the checkpoint: pass --chat-template explicitly")
    return tp, max_len, dtype, kv, notes


def vllm_config(profile: ModelProfile) -> EngineConfig:
    """`vllm serve` arguments."""
    tp, max_len, dtype, kv, notes = _common(profile)
    argv = ["vllm", "serve", profile.source, "--tensor-parallel-size", str(tp), "--dtype", dtype]
    argv += ["--max-model-len", str(max_len)] if max_len else []
    argv += ["--kv-cache-dtype", kv]
    reasoning, tools = VLLM_PARSERS.get(profile.model_type, (None, None))
    argv += ["--reasoning-parser", reasoning] if reasoning else []
    argv += ["--enable-auto-tool-choice", "--tool-call-parser", tools] if tools else []
    if profile.remote_code is not None:
        argv.append("--trust-remote-code")
        notes.append("the repo ships code (auto_map): review it before trusting it")
    if not tools:
        notes.append(f"no known vLLM tool-call parser for {profile.model_type}")
    if profile.multimodal:
        notes.append(
            f"a multimodal wrapper ({', '.join(profile.multimodal)} tower): onboard verifies its language model "
            "on text; add --language-model-only to serve that alone (without it the towers are served too, "
            "unverified)"
        )
    return EngineConfig("vllm", tuple(argv), tuple(notes))


def sglang_config(profile: ModelProfile) -> EngineConfig:
    """`python -m sglang.launch_server` arguments."""
    tp, max_len, dtype, kv, notes = _common(profile)
    argv = ["python", "-m", "sglang.launch_server", "--model-path", profile.source, "--tp", str(tp), "--dtype", dtype]
    argv += ["--context-length", str(max_len)] if max_len else []
    argv += ["--kv-cache-dtype", kv]
    reasoning, tools = SGLANG_PARSERS.get(profile.model_type, (None, None))
    argv += ["--reasoning-parser", reasoning] if reasoning else []
    argv += ["--tool-call-parser", tools] if tools else []
    if profile.remote_code is not None:
        argv.append("--trust-remote-code")
    if not tools:
        notes.append(f"no known SGLang tool-call parser for {profile.model_type}")
    return EngineConfig("sglang", tuple(argv), tuple(notes))


def engine_configs(profile: ModelProfile) -> tuple[EngineConfig, ...]:
    return vllm_config(profile), sglang_config(profile)
