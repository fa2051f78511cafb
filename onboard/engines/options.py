"""What `onboard validate --engine` adds around the usual validate run: the started engine, and its own checks.

Plain values in, no click: the options themselves are onboard/cli/engine_options.py."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from onboard.errors import InputError


@contextlib.contextmanager
def started_engine(
    engine_name: str | None,
    source: str,
    dtype: str,
    gguf: Path | None,
    port: int | None,
    work: Path,
    endpoint: str | None,
    budget_kl: float | None = None,
    plan_file: Path | None = None,
    engine_args: Sequence[str] = (),
) -> Iterator[Any]:
    """The running engine (engines.served.Served) for the block, or None without --engine."""
    if engine_name is None:
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
    from onboard.engines.llamacpp import gguf_file_type
    from onboard.engines.served import GGUF_DTYPES, engine_endpoint

    if gguf is not None and gguf.is_file() and budget_kl is None and plan_file is None:
        code, type_name = gguf_file_type(gguf)
        if code not in GGUF_DTYPES:  # refused before the engine starts and the whole run is spent
            raise InputError(
                f"{gguf.name} is quantized ({type_name}): it is judged against a KL budget",
                "pass --budget-kl X or --plan quantize-plan.json",
            )
    with engine_endpoint(
        engine_name, folder, folder.name, dtype, gguf=gguf, port=port, work=work, engine_args=engine_args
    ) as served:
        yield served


def judge_served(
    result: dict[str, Any], served: Any, source: str, budget_kl: float | None, plan_file: Path | None
) -> None:
    """Add the engine's own checks to a validate result (in place): the GGUF tokenizer, the quantized KL budget."""
    from onboard.engines.served import (
        FIDELITY_CHECKS,
        add_checks,
        budget_from,
        gguf_tokenizer_checks,
        kl_budget_check,
        plan_types_check,
    )

    if served is None:
        if budget_kl is not None or plan_file is not None:
            raise InputError("--budget-kl and --plan judge a quantized GGUF", "add --engine llama.cpp --gguf FILE")
        return
    if served.gguf is None:
        return
    checks = gguf_tokenizer_checks(served, Path(source))
    if not served.quantized:
        add_checks(result, checks)
        return
    budget, planned = budget_from(budget_kl, plan_file)
    if budget is None:
        raise InputError(
            f"{served.gguf.name} is quantized ({served.file_type}): it is judged against a KL budget",
            "pass --budget-kl X or --plan quantize-plan.json",
        )
    checks.append(kl_budget_check(result, budget, planned))
    if plan_file is not None:
        checks.append(plan_types_check(served.gguf, plan_file, Path(source)))
    add_checks(result, checks, informational=FIDELITY_CHECKS)
