"""`onboard quantize-plan`: a per-layer quantization plan whose KL to the reference is measured."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import click

from onboard.cli import emit_json, say
from onboard.cli.options import FOLDER, REVISION_OPTION, SERVED_DTYPE_OPTION, FiniteFloatRange, option
from onboard.errors import ChecksFailed

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:([kmgt])(i?))?b?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """Bytes from `123456`, `1.5G`, `800MB` or `2GiB` (SI and binary prefixes)."""
    match = _SIZE.match(text)
    if not match:
        raise click.BadParameter(f"{text!r} is not a size (e.g. 1500000000, 1.5G, 800MB, 2GiB)")
    number, prefix, binary = match.groups()
    scale = (1024 if binary else 1000) ** ("kmgt".index(prefix.lower()) + 1) if prefix else 1
    return int(float(number) * scale)


@click.command("quantize-plan")
@click.argument("source")
@option(
    "--budget-kl",
    type=FiniteFloatRange(min=0, min_open=True),
    help="Largest mean KL(reference || quantized) per token allowed; the plan uses the fewest bytes within it.",
)
@option("--target-bytes", help="Weight bytes to fit (e.g. 1.5G, 800MB); the plan has the least KL within it.")
@option(
    "--golden",
    type=FOLDER,
    help="Golden folder of SOURCE: its prompts and continuations are the suite (default: the prompt suite alone).",
)
@option(
    "--formats",
    "formats_spec",
    default="all",
    help="Formats to choose from: all, llama.cpp, vllm, or a comma list of int8, fp8, fp8-block, int4-g128, "
    "mxfp4, q8_0, q6_k, q5_1, q4_k, q4_1, q4_0, q3_k (q3_k needs llama.cpp's own quantizers installed).",
)
@SERVED_DTYPE_OPTION
@option(
    "--out",
    type=FOLDER,
    help="Folder for quantize-plan.json, llama-quantize.sh and llmcompressor-recipe.yaml (default: "
    "quantize/<slug>; onboarding/<slug>/<revision> puts the plan in the onboarding report).",
)
@option(
    "--max-tokens",
    type=click.IntRange(min=2),
    default=1024,
    help="Tokens kept per prompt (with its golden continuation).",
)
@REVISION_OPTION
@option("--json", "as_json", is_flag=True, help="Print the plan summary as JSON on stdout.")
def quantize_plan_command(
    source: str,
    budget_kl: float | None,
    target_bytes: str | None,
    golden: Path | None,
    formats_spec: str,
    dtype: str,
    out: Path | None,
    max_tokens: int,
    revision: str | None,
    as_json: bool,
) -> None:
    """Choose a quantization format per unit of SOURCE (each layer's attention and MLP or experts, shared experts,
    embedding, head) from measured sensitivities, then measure the whole plan against the reference.

    Give exactly one of --budget-kl and --target-bytes. Formats are simulated in torch as the engines round them.
    Writes the plan and engine-ready files (llama.cpp --tensor-type overrides, an llm-compressor recipe with its
    ignore list). Exit 0 when the plan meets the budget or fits the size, 1 when it cannot, 2 on unusable input.

    \b
    Examples:
      onboard quantize-plan ./checkpoint --budget-kl 0.01
      onboard quantize-plan ./checkpoint --target-bytes 1.2G --formats llama.cpp --json
      onboard quantize-plan ./checkpoint --golden golden_outputs/Org__Model --budget-kl 0.005 --formats vllm
    """
    from onboard.inspect_checkpoint.source import refuse_local_revision
    from onboard.quantize.formats import parse_formats
    from onboard.quantize.plan import Request, run

    if (budget_kl is None) == (target_bytes is None):
        raise click.UsageError("give exactly one of --budget-kl and --target-bytes")
    refuse_local_revision(source, revision)
    request = Request(
        source,
        budget_kl=budget_kl,
        target_bytes=parse_size(target_bytes) if target_bytes else None,
        golden=golden,
        formats=parse_formats(formats_spec),
        dtype=dtype,
        out=out,
        revision=revision,
        max_tokens=max_tokens,
    )
    outcome = run(request, say)
    _report(outcome)
    if as_json:
        emit_json(outcome.summary)
    s, d = outcome.summary, outcome.detail
    if not outcome.met and s["budget_kl"] is not None:
        raise ChecksFailed(
            f"the plan's measured KL {s['measured_kl']:.3e} exceeds --budget-kl {s['budget_kl']:.3e} after "
            f"{len(d['rounds'])} rounds of re-planning",
            "raise --budget-kl, or allow finer formats (--formats all)",
        )
    if not outcome.met:
        raise ChecksFailed(
            f"no plan fits --target-bytes {d['target_bytes']:,}: the smallest is {s['bytes']:,} bytes",
            "raise --target-bytes, or allow coarser formats (--formats all)",
        )


def _report(outcome: Any) -> None:
    s, d = outcome.summary, outcome.detail
    say(f"{'unit':<22} {'format':<10} {'KL alone':>10}")
    for unit in s["units"]:
        say(f"{unit['unit']:<22} {unit['format']:<10} {unit['kl_alone']:>10.3e}")
    say(
        f"plan: {s['bytes']:,} bytes ({s['bytes'] / s['bf16_bytes']:.1%} of bf16's {s['bf16_bytes']:,}); "
        f"KL predicted {s['predicted_kl']:.3e}, measured {s['measured_kl']:.3e}"
    )
    best = s["uniform_best"]
    if best:
        say(
            f"best uniform format: {best['format']} ({best['bytes']:,} bytes, measured KL {best['measured_kl']:.3e}); "
            f"the plan saves {best['bytes'] - s['bytes']:,} bytes against it"
        )
    else:
        say("best uniform format: none of the formats alone meets the budget / fits the size")
    for name, reason in d.get("formats_left_out", {}).items():
        say(f"not planned: {name}: {reason}")
    same = d.get("same_bytes_uniform")
    if same and same.get("plan_over_uniform_kl") is not None:
        say(
            f"nearest uniform size: {same['format']} ({same['bytes']:,} bytes): measured KL {same['measured_kl']:.3e}, "
            f"plan / uniform = {same['plan_over_uniform_kl']:.2f}"
        )
    from onboard.quantize.formats import FORMATS

    targeted = {FORMATS[name].engine for name in d["formats"]}  # engines the user chose formats of
    for engine, info in d.get("engines", {}).items():
        if info["unsupported"] and engine in targeted:
            say(f"{engine}: cannot serve the planned formats of {', '.join(info['unsupported'])} (see {info['file']})")
    say("wrote " + ", ".join(str(f) for f in outcome.files))
