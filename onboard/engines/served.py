"""`onboard validate --engine llama.cpp|vllm`: the engine started on loopback for the run, and what is judged
beyond the usual checks.

- llama.cpp serves a GGUF (--gguf, else SOURCE converted to F16 by llama.cpp's converter). Its tokenizer is checked
  against transformers' on the verify-tokenizer corpus (`gguf_tokenizer`). An F16 / BF16 / F32 GGUF is judged by
  the usual parity checks in that dtype; a quantized one by its KL budget (`quantized_kl_budget`), the dtype-noise
  parity checks then kept as information, not verdicts (quantization moves logits on purpose).
- vLLM serves the checkpoint folder itself in --dtype.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onboard.checks import Check
from onboard.errors import InputError

ENGINES = ("llama.cpp", "vllm")
GGUF_DTYPES = {0: "float32", 1: "float16", 32: "bfloat16"}
"""llama_ftype (general.file_type) -> the dtype the usual checks judge; any other file type is quantized."""
QUANTIZED_DTYPE = "float16"  # llama.cpp computes quantized matmuls against f16/f32 activations; tolerances unused
FIDELITY_CHECKS = ("logit_parity", "long_context_parity", "logit_scale", "greedy_parity")
"""Judged against dtype noise; for a quantized GGUF they are information and quantized_kl_budget decides."""


@dataclass(frozen=True)
class Served:
    url: str
    name: str
    dtype: str
    gguf: Path | None = None
    file_type: str | None = None
    """The GGUF's type name (MOSTLY_F16, MOSTLY_Q8_0, ...); None for vLLM."""
    quantized: bool = False


def _needs_budget(gguf: Path, file_type: str) -> InputError:
    return InputError(
        f"{gguf.name} is quantized ({file_type}): it is judged against a KL budget",
        "pass --budget-kl X or --plan quantize-plan.json",
    )


@contextlib.contextmanager
def started_engine(
    engine: str | None,
    source: str,
    dtype: str,
    gguf: Path | None,
    port: int | None,
    work: Path,
    endpoint: str | None,
    budget_kl: float | None = None,
    plan_file: Path | None = None,
    engine_args: Sequence[str] = (),
    prompt_cache: bool = False,
) -> Iterator[Served | None]:
    """The engine serving the checkpoint folder SOURCE for the block, or None without --engine. llama.cpp serves
    `gguf`, or SOURCE converted into `work`; `engine_args`: extra vLLM arguments (validate --speculative);
    `prompt_cache`: llama.cpp keeps the KV of the prefix shared with the previous request (validate --load: vLLM's
    prefix caching is on by default)."""
    if engine is None:
        if gguf is not None or port is not None:
            raise InputError("--gguf and --engine-port need --engine", "add --engine llama.cpp (or vllm)")
        yield None
        return
    if endpoint:
        raise InputError("--engine starts its own endpoint", "drop --endpoint, or drop --engine")
    folder = Path(source)
    if not folder.is_dir():
        raise InputError(
            f"--engine needs a local checkpoint folder as SOURCE ({source} is not a folder)",
            "download the checkpoint (hf download ORG/NAME --local-dir DIR) and pass DIR",
        )
    from onboard.engines import llamacpp, vllm

    if gguf is not None and gguf.is_file() and budget_kl is None and plan_file is None:
        code, type_name = llamacpp.gguf_file_type(gguf)
        if code not in GGUF_DTYPES:  # refused before the engine starts and the whole run is spent
            raise _needs_budget(gguf, type_name)
    name = folder.name
    if engine == "vllm":
        if gguf is not None:
            raise InputError("--gguf is for --engine llama.cpp", "drop --gguf, or use --engine llama.cpp")
        with vllm.serve(folder, name, work / "vllm.log", dtype=dtype, port=port, extra_args=engine_args) as url:
            yield Served(url, name, dtype)
        return
    if engine != "llama.cpp":
        raise InputError(f"--engine {engine!r} is not an engine", f"use one of {', '.join(ENGINES)}")
    if engine_args:
        raise InputError("--speculative starts vLLM with a speculative config", "use --engine vllm")
    llamacpp.require()
    if gguf is None:
        from onboard.engines.convert import refuse_repository_code

        refuse_repository_code(folder)  # the converter would run the repository's code outside the sandbox
        converted = llamacpp.convert(folder, work / "model-f16.gguf", "f16")
        if converted.path is None:
            first = converted.findings[0]
            raise InputError(first.message, first.hint)
        gguf = converted.path
    elif not gguf.is_file():
        raise InputError(f"--gguf {gguf}: no such file", "pass the GGUF `onboard convert gguf` wrote")
    code, type_name = llamacpp.gguf_file_type(gguf)
    with llamacpp.serve(gguf, name, work / "llama.cpp.log", port=port, prompt_cache=prompt_cache) as url:
        yield Served(url, name, GGUF_DTYPES.get(code, QUANTIZED_DTYPE), gguf, type_name, code not in GGUF_DTYPES)


def judge_served(
    result: dict[str, Any], served: Served | None, source: str, budget_kl: float | None, plan_file: Path | None
) -> None:
    """Add the engine's own checks to a validate result (in place): the GGUF tokenizer, the quantized KL budget."""
    from onboard.validate_serving.report import add_checks

    if served is None:
        if budget_kl is not None or plan_file is not None:
            raise InputError("--budget-kl and --plan judge a quantized GGUF", "add --engine llama.cpp --gguf FILE")
        return
    if served.gguf is None:
        return
    checks = gguf_tokenizer_checks(served, Path(source))
    if served.quantized:
        budget, planned = budget_from(budget_kl, plan_file)
        if budget is None:
            raise _needs_budget(served.gguf, served.file_type or "")
        checks.append(kl_budget_check(result, budget, planned))
        if plan_file is not None:
            checks.append(plan_types_check(served.gguf, plan_file, Path(source)))
        for check in result["checks"]:
            if check["name"] in FIDELITY_CHECKS and check["required"]:
                check["required"] = False
                check["detail"] = f"information (quantized GGUF, judged by quantized_kl_budget): {check['detail']}"
    add_checks(result, checks)


def budget_from(budget_kl: float | None, plan_file: Path | None) -> tuple[float | None, float | None]:
    """(budget, planned KL): --budget-kl wins; else the plan's budget_kl and measured_kl."""
    if plan_file is None:
        return budget_kl, None
    from onboard.quantize.plan_file import read_plan

    plan = read_plan(plan_file)
    return (budget_kl if budget_kl is not None else plan.budget_kl), plan.measured_kl


def gguf_tokenizer_checks(served: Served, folder: Path) -> list[Check]:
    """llama.cpp's ids (the GGUF's own vocabulary) against transformers' on the verify-tokenizer corpus.

    `gguf_tokenizer` (required): the first string whose ids differ is a gguf-tokenizer-drift. A string that differs
    only because it is not in NFC (llama.cpp does not run a tokenizer.json's NFC normalizer) is counted in
    `gguf_tokenizer_normalization` instead: a runtime limitation to know about (warning), not a conversion defect.
    """
    import unicodedata

    from onboard.engines.llamacpp import tokenize
    from onboard.verify_tokenizer.corpus import STRESS
    from onboard.verify_tokenizer.subject import load_subject

    subject = load_subject(folder)
    texts = [t for t in dict.fromkeys(STRESS) if t]
    unnormalized: list[str] = []
    drift = None
    for text, got in zip(texts, tokenize(served.url, texts)):
        want = subject.encode(text)
        if got == want:
            continue
        nfc = unicodedata.normalize("NFC", text)
        if nfc != text and tokenize(served.url, [nfc])[0] == want:
            unnormalized.append(text)
        else:
            drift = drift or (text, got, want)
    if drift is None:
        detail = (
            f"{len(texts)} corpus strings: llama.cpp's ids from the GGUF equal transformers' ids (up to NFC "
            "normalization, see gguf_tokenizer_normalization)"
        )
        checks = [Check("gguf_tokenizer", True, detail=detail)]
    else:
        text, got, want = drift
        at = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        detail = (
            f"gguf-tokenizer-drift: {text[:80]!r} tokenizes differently through the GGUF (llama.cpp) than through "
            f"transformers from id {at}: llama.cpp {got[at : at + 6]} vs transformers {want[at : at + 6]} "
            f"({len(got)} vs {len(want)} ids); the converter wrote another pre-tokenizer, vocabulary or merges than "
            "the tokenizer uses: check tokenizer.ggml.pre against `onboard verify-tokenizer`"
        )
        checks = [Check("gguf_tokenizer", False, detail=detail, data={"code": "gguf-tokenizer-drift", "text": text})]
    if unnormalized:
        detail = (
            f"{len(unnormalized)} corpus strings not in NFC (first {unnormalized[0]!r}) tokenize differently: "
            "transformers normalizes them to NFC, llama.cpp does not; their NFC forms match. Text reaching llama.cpp "
            "should be NFC-normalized by the caller"
        )
        checks.append(Check("gguf_tokenizer_normalization", False, False, detail))
    return checks


def kl_budget_check(result: dict[str, Any], budget: float, planned: float | None) -> Check:
    """Mean KL per position (over every prompt position the parity compared) against the budget."""
    kls = [p["kl"] for p in result.get("positions", []) if p.get("kl") is not None]
    if not kls:
        detail = "no finite KL measured: every position overflowed or no position was compared; see logit_parity"
        return Check("quantized_kl_budget", False, detail=detail)
    measured = math.fsum(kls) / len(kls)
    plan = f", planned {planned:.4g}" if planned is not None else ""
    ok = measured <= budget
    detail = (
        f"mean KL {measured:.4g} over {len(kls)} positions {'<=' if ok else '>'} budget {budget:.4g}{plan} "
        "(the dtype-noise parity checks are information for a quantized GGUF)"
    )
    data = {"measured_kl": measured, "budget_kl": budget, "planned_kl": planned}
    return Check("quantized_kl_budget", ok, detail=detail, data=data)


def plan_types_check(gguf: Path, plan_file: Path, folder: Path) -> Check:
    """Every tensor the plan names is stored as the plan rounded it: a GGUF quantized another way would be judged
    against a planned KL that does not describe it."""
    from onboard.engines import llamacpp
    from onboard.quantize.plan_file import read_plan

    overrides = llamacpp.plan_overrides(read_plan(plan_file), folder)
    wrong = llamacpp.types_not_as_planned(gguf, overrides)
    if not wrong:
        named = len(overrides.tensor_types) + bool(overrides.token_embedding_type) + bool(overrides.output_tensor_type)
        detail = (
            f"{gguf.name} stores every tensor of the plan's {named} per-tensor types as {plan_file.name} rounded it"
        )
        return Check("gguf_plan_types", True, detail=detail)
    detail = (
        f"{gguf.name} is not the plan in {plan_file.name}: {llamacpp.first_of(wrong)}; convert it with "
        f"`onboard convert gguf SOURCE --plan {plan_file}`"
    )
    return Check("gguf_plan_types", False, detail=detail, data={"code": "gguf-plan-not-applied", "differ": wrong})
