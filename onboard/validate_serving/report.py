"""The validate stage result (validation.json, the `--json` output) and its human summary.

Beyond onboard/checks.py's stage result: failed and not_checked (check names), self_check and mode, candidate,
golden, tolerances with the threshold table, positions (per-position figures for plots) and performance.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from onboard.checks import Check, all_passed, failed_names, read_checks, stage_result
from onboard.comparator import THRESHOLDS, Tolerances
from onboard.fsutil import atomic_write
from onboard.validate_serving.candidates import Candidate
from onboard.validate_serving.golden import GoldenSet
from onboard.validate_serving.parity import PromptParity

SELF_CHECK = "self-check: transformers against its own goldens (tests the harness, not a serving implementation)"
"""What `--candidate reference` proves. The checklist never ticks an item from such a result."""


def _finite(value: float) -> float | None:
    """JSON has no inf/NaN: they become null (the check detail says what happened)."""
    return round(value, 8) if math.isfinite(value) else None


def build_result(
    golden: GoldenSet,
    candidate: Candidate,
    checks: list[Check],
    parities: list[PromptParity],
    tol: Tolerances,
    performance: dict[str, Any] | None,
) -> dict[str, Any]:
    self_check = candidate.info.kind == "reference-as-candidate"
    return json_safe(
        stage_result(
            "validate",
            checks,
            self_check=self_check,
            mode=SELF_CHECK if self_check else f"{candidate.info.kind} against the reference's goldens",
            failed=failed_names(checks),
            not_checked=[c.name for c in checks if c.skipped],
            candidate=asdict(candidate.info) | {"capabilities": asdict(candidate.capabilities)},
            golden={
                "folder": str(golden.folder),
                "source": golden.manifest.get("source"),
                "revision": golden.manifest.get("revision"),
                "reference": golden.manifest.get("reference"),
                "versions": golden.manifest.get("versions"),
            },
            tolerances=asdict(tol),
            thresholds=THRESHOLDS,
            positions=[
                {
                    "prompt": p.prompt.name,
                    "index": m.index,
                    "kl": _finite(m.kl),
                    "max_logprob_error": _finite(m.max_logprob_error),
                    "top1_agree": m.top1_agree,
                }
                for p in parities
                for m in p.metrics
            ],
            check_data={c.name: c.data for c in checks if c.data},
            performance=performance,
        )
    )


def pair_matrix(result: dict[str, Any]) -> list[str]:
    """Several endpoints: each one's verdict, then the pair matrix (row vs column: `=` agree, else where they first
    diverge, as prompt@generated token)."""
    endpoints = result["endpoints"]
    lines = ["endpoints:"] + [
        f"  [{n}] {e['endpoint']}: {'PASSED' if e['passed'] else 'FAILED ' + ', '.join(e['failed'])}"
        f"{' (' + e['result'] + ')' if e.get('result') else ''}"
        for n, e in enumerate(endpoints, 1)
    ]
    number = {e["endpoint"]: n for n, e in enumerate(endpoints, 1)}
    cells = {}
    for pair in (result.get("check_data") or {}).get("endpoints_agree", {}).get("pairs", []):
        first = pair.get("first")
        cell = "=" if pair["passed"] else f"{first['prompt']}@{first['generated_index']}" if first else "differ"
        cells[number[pair["a"]], number[pair["b"]]] = cells[number[pair["b"]], number[pair["a"]]] = cell
    n = len(endpoints)
    width = max([6, *(len(c) + 2 for c in cells.values())])
    lines.append("pair matrix (= agree; else the first divergence, prompt@generated token):")
    lines.append((" " * 6 + "".join(f"[{j}]".ljust(width) for j in range(1, n + 1))).rstrip())
    for i in range(1, n + 1):
        row = "".join(("." if i == j else cells.get((i, j), "?")).ljust(width) for j in range(1, n + 1))
        lines.append(f"  [{i}] {row}".rstrip())
    return lines


def add_checks(result: dict[str, Any], checks: Sequence[Check]) -> None:
    """Append `checks` to a validate result (in place, their data under `check_data`) and judge it again."""
    result["checks"].extend(c.to_dict() for c in checks)
    for c in checks:
        if c.data:
            result.setdefault("check_data", {})[c.name] = json_safe(c.data)
    every, _ = read_checks(result["checks"], "validate result")
    result.update(
        passed=all_passed(every), failed=failed_names(every), not_checked=[c.name for c in every if c.skipped]
    )


def json_safe(value: Any) -> Any:
    """Replace inf/NaN anywhere (check data, tolerances) with null: strict JSON parsers reject them."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def write_result(result: dict[str, Any], path: Path) -> None:
    """validation.json and validation.md side by side, each written to a temp file then renamed."""
    atomic_write(path, json.dumps(result, indent=2, default=str) + "\n")
    atomic_write(path.with_suffix(".md"), summary(result))


def _mark(check: dict[str, Any]) -> str:
    if check.get("not_applicable"):
        return "n/a "
    if check["skipped"]:
        return "SKIP"
    return "ok  " if check["passed"] else ("FAIL" if check["required"] else "warn")


def summary(result: dict[str, Any]) -> str:
    """The human summary: verdict, every check, performance figures with where they were measured."""
    cand, verdict = result["candidate"], "PASSED" if result["passed"] else "FAILED"
    against = f"vs goldens {result['golden']['folder']}"
    if result.get("self_check"):
        lines = [f"validate SELF-CHECK: {verdict} — {cand['name']} ({cand['dtype']}) {against}"]
        lines.append(f"  {SELF_CHECK}: no checklist item is ticked by it")
    else:
        lines = [f"validate: {verdict} — {cand['name']} ({cand['kind']}, {cand['dtype']}) {against}"]
    lines += [""] + [f"  [{_mark(c)}] {c['name']}: {c['detail']}" for c in result["checks"]]
    if result.get("endpoints"):
        lines += ["", *pair_matrix(result)]
    if result.get("divergence"):  # the bisect ran: a fidelity check failed on an in-process adapter
        lines.append(f"  where: {result['divergence']} (per_layer_error in the JSON)")
    perf = result.get("performance")
    if perf:
        lines += [
            "",
            f"performance ({perf['dtype']}; {perf['hardware'].get('gpu') or perf['hardware'].get('cpu')}; "
            + ", ".join(f"{k} {v}" for k, v in perf["versions"].items())
            + "):",
        ]
        prefill = ", ".join(f"{p['tokens']} tok {p['ms']:.1f} ms" for p in perf["prefill_by_length"])
        lines.append(f"  prefill latency (TTFT, max_tokens=1): {prefill}")
        lines.append(
            f"  decode: TTFT {perf['ttft_ms']:.1f} ms, TPOT {perf['tpot_ms']:.2f} ms, ITL p50 {perf['itl_p50_ms']:.2f} ms / "
            f"p99 {perf['itl_p99_ms']:.2f} ms over {perf['decode_tokens']} tokens"
        )
        bn = perf["throughput_tok_s_bN"]
        lines.append(
            f"  throughput: batch 1 {perf['throughput_tok_s_b1']:.1f} tok/s, batch {perf['batch_n']} "
            + (f"{bn:.1f} tok/s" if bn else "not measured")
        )
        mem = perf["peak_memory_bytes"]
        lines.append(
            f"  peak memory: {mem / 2**20:.1f} MiB ({perf['peak_memory_kind']})"
            if mem
            else "  peak memory: not observable"
        )
        lines += [f"  note: {n}" for n in perf.get("notes", [])]
    return "\n".join(lines) + "\n"
