"""Composition coverage: every decoder architecture of the installed transformers that tests/tiny builds is
composed from its profile alone and, where composition needs no stub, judged by
generate's parity check (the one comparator's calibrated verdict: float32 against transformers, eager, prompts up to
one longer than twice the sliding window).

The outcome per architecture is the table in docs/coverage.md; the test recomputes it and fails when it drifts.
Regenerate that block with:

    OMP_NUM_THREADS=1 python -m tests.generate.test_compose_coverage --write
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
COVERAGE_DOC = REPO / "docs" / "coverage.md"
START, END = "<!-- compose-coverage:start -->", "<!-- compose-coverage:end -->"
COMMITTED_NOTE = "(committed adapter)"
REGENERATE = "OMP_NUM_THREADS=1 python -m tests.generate.test_compose_coverage --write"
# Why the reference disagrees with a composed adapter that reads the checkpoint faithfully (checked by hand).
REFERENCE_NOTES = {
    "youtu": "transformers' YoutuPreTrainedModel._init_weights zeroes the pad_token_id row of the loaded embedding "
    "(through .data, after loading); the adapter keeps the checkpoint's row",
    "cohere2_vision": "transformers' Cohere2VisionForConditionalGeneration does not multiply the logits by "
    "text_config.logit_scale (Aya Vision's wrapper and vLLM's Cohere2Vision, through its language model, do); the "
    "adapter applies it",
}


def outcome(model_type: str, root: Path) -> tuple[str, str]:
    """(result, detail) for one architecture: composed (parity passed: the comparator's calibrated verdict, as
    generate judges an adapter, and inspect's config lint clean, as new-model requires), lint fails (parity passed
    but inspect calls a config key unknown), composed but parity fails (the failed checks named), not runnable (stubs, a refused
    config value, an ambiguous weight map), or no tiny checkpoint."""
    import msgspec

    from onboard.errors import InputError
    from onboard.generate_adapter.adapter_source import adapter_source
    from onboard.generate_adapter.parity import check_parity
    from onboard.generate_adapter.plan import plan
    from onboard.inspect_checkpoint import inspect
    from onboard.inspect_checkpoint.verdicts import inspect_checks
    from tests.generate.conftest import perturb
    from tests.tiny.factory import make_tiny_checkpoint

    checkpoint = root / model_type
    try:
        make_tiny_checkpoint(model_type, checkpoint)
    except Exception as exc:  # the factory's own limits (e.g. a config the installed transformers rejects)
        return "no tiny checkpoint", f"{type(exc).__name__}"
    perturb(checkpoint)
    try:
        profile = inspect(str(checkpoint))
        the_plan = plan(profile)
    except InputError as exc:
        return "not composed", _clean(exc.message)
    if the_plan.stubs:
        return "stubs", "; ".join(f"{s.op}: {_clean(s.reason)}" for s in the_plan.stubs)
    adapter_file = root / "adapters" / f"{model_type}.py"
    adapter_file.parent.mkdir(exist_ok=True)
    adapter_file.write_text(adapter_source(the_plan))
    overrides = f" (family facts: {', '.join(the_plan.overrides)})" if the_plan.overrides else ""
    try:
        parity = check_parity(adapter_file, checkpoint, "float32")
    except InputError as exc:
        return "refused at load", _clean(exc.message)
    if parity["passed"]:
        # new-model also needs inspect's lint clean: a key the adapter reads but inspect calls unknown blocks promotion
        lint = next(c for c in inspect_checks(msgspec.to_builtins(profile)) if c.name == "config_lint_clean")
        if not lint.passed:
            return "lint fails", _clean(lint.detail) + overrides
        return "composed", "parity passed" + overrides
    if parity["status"] == "unverified":  # the reference itself raised: nothing to judge against
        return "parity unverified", _clean(parity["detail"]) + overrides
    note = f"; {REFERENCE_NOTES[model_type]}" if model_type in REFERENCE_NOTES else ""
    failed = ", ".join(parity["failed"]) or _clean(parity["detail"])  # no checks named: the adapter raised
    return "parity fails", f"failed: {failed}{overrides}{note}"


def _clean(text: str) -> str:
    """One line for the table, without the run's temporary folder (its random name would change every run)."""
    text = re.sub(r"\s+", " ", text.replace("|", "/"))
    return re.sub(re.escape(str(Path(tempfile.gettempdir()))) + r"(/tmp[^/\s]*)?", "…", text).strip()


def coverage_table() -> tuple[str, dict[str, str]]:
    """The docs/coverage.md block (markdown table) and {model_type: result}."""
    import torch

    from onboard.generate_adapter.families import committed_families
    from tests.tiny.configs import TINY
    from tests.tiny.tiny_wrappers import ALL_WRAPPERS

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    torch.set_num_threads(1)
    committed = committed_families()
    rows, results = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for model_type in sorted({*TINY, *ALL_WRAPPERS}):  # wrappers: their language model, read from the wrapper
            result, detail = outcome(model_type, Path(tmp))
            results[model_type] = result
            name = f"`{model_type}` {COMMITTED_NOTE}" if model_type in committed else f"`{model_type}`"
            rows.append(f"| {name} | {result} | {detail} |")
    composed = [m for m, r in results.items() if r == "composed"]
    wrappers = [m for m in composed if m in ALL_WRAPPERS]
    head = (
        f"{len(composed)} of {len(results)} architectures compose and pass parity, among them "
        f"{sum(m in committed for m in composed)} of the {len(committed)} families with a committed adapter "
        f"(adapters/, composed from adapters/profiles/). {len(wrappers)} of them are multimodal wrappers (of "
        f"{len(ALL_WRAPPERS)} built: tests/tiny/tiny_wrappers.py) whose language model the adapter reads from the "
        "wrapper's checkpoint; the language models they wrap have rows of their own.\n\n"
        "| model_type | result | what is missing / detail |\n|---|---|---|\n"
    )
    return head + "\n".join(rows) + "\n", results


def documented_block() -> str:
    text = COVERAGE_DOC.read_text()
    return text[text.index(START) + len(START) : text.index(END)].strip("\n") + "\n"


@pytest.mark.slow  # every tiny checkpoint tests/tiny builds, an adapter and a parity run each
def test_composition_coverage_matches_docs() -> None:
    from onboard.generate_adapter.families import committed_families

    table, results = coverage_table()
    failing = [m for m in committed_families() if results.get(m) != "composed"]
    assert not failing, f"committed families that no longer compose and pass parity: {failing}"
    beyond = [m for m, r in results.items() if r == "composed" and m not in committed_families()]
    assert len(beyond) >= 30, f"only {len(beyond)} architectures beyond the committed families compose: {beyond}"
    unlinted = [m for m, r in results.items() if r == "lint fails"]
    assert not unlinted, f"{unlinted}: the adapter passes parity but inspect's lint calls a key it reads unknown"
    assert table == documented_block(), f"docs/coverage.md is stale; regenerate it with: {REGENERATE}"


def write_docs() -> None:
    table, _ = coverage_table()
    text = COVERAGE_DOC.read_text()
    start, end = text.index(START) + len(START), text.index(END)
    COVERAGE_DOC.write_text(text[:start] + "\n" + table + text[end:])


if __name__ == "__main__":
    if "--write" in sys.argv:
        write_docs()
    else:
        print(coverage_table()[0])
