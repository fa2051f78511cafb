"""Everything the onboarding report shows, read defensively from stage results and the evaluated checklist.

A stage's keys may be missing or malformed in a partial run: each reader returns what it can and adds a line to
`missing` saying what is absent and why, so the report states it instead of failing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from onboard import svg
from onboard.promote.checklist import ChecklistState
from onboard.promote.stage_results import STAGE_FILES, StageResults
from onboard.quantize import report as quantize_report
from onboard.speculative import report as speculative_report
from onboard.tool_calls import report as tool_calls_report

GIB = 1024**3
# Value of a per-layer row, first key present: the bisect's `rel`, then older per-layer formats.
ERROR_KEYS = ("rel", "max_abs_error", "max_error", "error", "max_logprob_error", "kl")
BEFORE = ("embedding",)  # model-level points that run before layer 0; the others run after the last layer


@dataclass(frozen=True)
class Plot:
    id: str
    title: str
    svg: str
    caption: str


@dataclass(frozen=True)
class Table:
    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class ReportData:
    state: ChecklistState
    facts: tuple[tuple[str, str], ...]
    tables: tuple[Table, ...]
    plots: tuple[Plot, ...]
    missing: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class LayerError:
    """Per-layer rows (onboard/generate_adapter/divergence_stages.py) from the first stage result carrying them."""

    source: str
    rows: list[dict[str, Any]]
    first: dict[str, Any] | None
    data: dict[str, Any]


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def gather(state: ChecklistState, results: StageResults) -> ReportData:
    missing: list[str] = []
    validate = results.data("validate")
    profile = results.data("inspect")
    generate = results.data("generate")
    layers = _find_layers(validate, generate)
    plots = [
        p
        for p in (
            *_position_plots(validate, missing),
            _prefill_plot(validate, missing),
            _memory_plot(profile, missing),
            _layer_plot(layers, missing, validate, generate),
        )
        if p is not None
    ]
    tables = (_stage_table(results), _perf_table(validate), *_layer_tables(layers), _failed_table(results))
    # The quantization plan's section, when quantize-plan wrote one for this revision.
    q_plots, q_tables, q_missing = quantize_report.section(results.rev_dir)
    plots += [Plot(*p) for p in q_plots]
    tables += tuple(Table(*t) for t in q_tables)
    missing += q_missing
    # Speculative decoding, when draft-check wrote draft-check.json here.
    s_plots, s_tables = speculative_report.section(results.data("draft-check"))
    plots += [Plot(*p) for p in s_plots]
    tables += tuple(Table(*t) for t in s_tables)
    tables += tuple(Table(*t) for t in tool_calls_report.section(validate))
    return ReportData(state, _facts(profile), tuple(t for t in tables if t.rows), tuple(plots), tuple(missing))


def _facts(profile: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    params = profile.get("parameters") if isinstance(profile.get("parameters"), dict) else {}
    total = _num(params.get("total"))
    # A field inspect could not establish is the string "unknown" (onboard/serde.py): shown as such, never iterated.
    novelty, features = profile.get("novelty"), profile.get("features")
    pairs = [
        ("source", profile.get("source")),
        ("model type", profile.get("model_type")),
        ("architectures", ", ".join(map(str, profile.get("architectures") or [])) or None),
        ("closest family", profile.get("closest_family")),
        (
            "novelty",
            novelty
            if isinstance(novelty, str)
            else "; ".join(str(n) for n in novelty or [] if n != profile.get("closest_family")) or "none",
        ),
        ("parameters", f"{total / 1e9:.3g} B" if total and total >= 1e8 else f"{int(total):,}" if total else None),
        ("features", features if isinstance(features, str) else ", ".join(map(str, features or [])) or None),
    ]
    return tuple((k, str(v)) for k, v in pairs if v)


def _position_plots(validate: dict[str, Any], missing: list[str]) -> list[Plot]:
    rows = validate.get("positions")
    if not isinstance(rows, list) or not rows:
        missing.append("validate.json has no `positions`: no KL / logprob-error plots along positions")
        return []
    plots = []
    for key, title, label in (
        ("kl", "KL divergence along positions", "KL(reference ‖ served)"),
        ("max_logprob_error", "Max logprob error along positions", "max |Δ logprob|"),
    ):
        by_prompt: dict[str, list[tuple[float, float]]] = {}
        for r in rows:
            if isinstance(r, dict) and _num(r.get("index")) is not None and _num(r.get(key)) is not None:
                by_prompt.setdefault(f"prompt {r.get('prompt', '?')}", []).append((_num(r["index"]), _num(r[key])))  # type: ignore[arg-type]
        if not by_prompt:
            missing.append(f"validate.json positions carry no numeric `{key}`: its plot is left out")
            continue
        series = [svg.Series(name, tuple(pts)) for name, pts in sorted(by_prompt.items())]
        worst = max(((y, x, s.name) for s in series for x, y in s.points))
        caption = f"worst {worst[0]:.3g} at position {int(worst[1])} of {worst[2]}; {len(series)} prompt(s)"
        plots.append(
            Plot(f"plot-{key}", title, svg.line_chart(title, series, "token position", label, log_y=True), caption)
        )
    return plots


def _prefill_plot(validate: dict[str, Any], missing: list[str]) -> Plot | None:
    perf = validate.get("performance") if isinstance(validate.get("performance"), dict) else {}
    rows = perf.get("prefill_by_length")
    pts = [(_num(r.get("tokens")), _num(r.get("ms"))) for r in rows or [] if isinstance(r, dict)]
    pts = [(x, y) for x, y in pts if x is not None and y is not None]
    if not pts:
        missing.append("validate.json has no `performance.prefill_by_length`: no latency-by-length plot")
        return None
    title = "Prefill latency by prompt length"
    chart = svg.line_chart(title, [svg.Series("prefill", tuple(pts))], "prompt tokens", "ms", log_x=True)  # type: ignore[arg-type]
    return Plot("plot-prefill", title, chart, f"{len(pts)} prompt lengths, {int(max(pts)[0])} tokens at most")


def _memory_plot(profile: dict[str, Any], missing: list[str]) -> Plot | None:
    mem = profile.get("memory") if isinstance(profile.get("memory"), dict) else None
    if not mem or _num(mem.get("weights_bytes")) is None:
        missing.append(
            "profile.json has no `memory` plan: no memory plot"
            if not mem
            else "profile.json: weight bytes unknown (no headers, no index, no estimate): no memory plot"
        )
        return None
    raw = [("weights", _num(mem.get("weights_bytes")))]
    raw.append((f"KV, one sequence of {mem.get('max_model_len', '?')}", _num(mem.get("kv_bytes_per_sequence"))))
    raw.append(("recurrent state, one sequence", _num(mem.get("state_bytes_per_sequence")) or None))
    present = [(k, v) for k, v in raw if v is not None]
    unit, scale = ("GiB", GIB) if max(v for _, v in present) >= GIB / 4 else ("MiB", 1024**2)
    bars = [(k, v / scale) for k, v in present]
    target = mem.get("target") if isinstance(mem.get("target"), dict) else None
    limit = None
    caption = "weights and the cache of one sequence"
    if target and _num(target.get("memory_bytes_per_gpu")):
        count = int(_num(target.get("count")) or 1)
        total = _num(target["memory_bytes_per_gpu"]) * count  # type: ignore[operator]
        limit = (f"{count}× {target.get('gpu')}", total / scale)
        caption += (
            f"; target {count}× {target.get('gpu')} ({total / GIB:.1f} GiB): fits {target.get('fits')}, "
            f"{target.get('concurrent_sequences')} concurrent sequences"
        )
    title = "Memory plan"
    return Plot("plot-memory", title, svg.bar_chart(title, bars, unit, limit), caption)


def _layer_value(row: dict[str, Any]) -> float | None:
    return next((_num(row[k]) for k in ERROR_KEYS if _num(row.get(k)) is not None), None)


def _layer_sources(validate: dict[str, Any], generate: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Where per-layer error may be, in order: validate.json, generate.json (top level, then its `parity`)."""
    parity = generate.get("parity") if isinstance(generate.get("parity"), dict) else {}
    return [("validate.json", validate), ("generate.json", generate), ("generate.json parity", parity)]


def _find_layers(validate: dict[str, Any], generate: dict[str, Any]) -> LayerError | None:
    for source, data in _layer_sources(validate, generate):
        rows = data.get("per_layer_error")
        rows = (
            [r for r in rows if isinstance(r, dict) and _layer_value(r) is not None] if isinstance(rows, list) else []
        )
        if rows:
            first = data.get("first_divergence") if isinstance(data.get("first_divergence"), dict) else None
            return LayerError(source, rows, first, data)
    return None


def _layer_plot(
    found: LayerError | None, missing: list[str], validate: dict[str, Any], generate: dict[str, Any]
) -> Plot | None:
    """The worst relative error per layer (log scale), the tolerance, the first divergence marked. Points outside
    the decoder layers have layer null: the embedding is drawn before layer 0, the final norm and logits after."""
    if found is None:
        missing.append(_layers_unknown(validate, generate))
        return None
    last = int(max((_num(r.get("layer")) or 0.0) for r in found.rows))
    worst: dict[float, float] = {}
    for row in found.rows:
        x, value = _layer_x(row, last), _layer_value(row)
        if x is not None and value is not None:
            worst[x] = max(worst.get(x, 0.0), value)
    series = [svg.Series("worst error per layer", tuple(sorted(worst.items())))]
    tol = _num(found.data.get("point_tolerance"))
    if tol is not None and len(worst) > 1:
        series.append(svg.Series("tolerance", ((min(worst), tol), (max(worst), tol))))
    marker, caption = None, f"from {found.source}; no point beyond tolerance"
    first = found.first
    if first is not None and _layer_x(first, last) is not None:
        where = _where(first)
        marker = (_layer_x(first, last), f"first divergence: {where}")
        caption = f"from {found.source}; first divergence at {where}"
    elif worst:
        top = max(worst.items(), key=lambda kv: kv[1])
        caption = f"from {found.source}; largest at layer {int(top[0])}: {top[1]:.3g}"
    label = "rel. error (max|Δ|/max|ref|)" if "rel" in found.rows[0] else "error"
    chart = svg.line_chart(
        "Per-layer error", series, "layer (embedding before 0, head after the last)", label, log_y=True, marker=marker
    )
    return Plot("plot-layers", "Per-layer error", chart, caption)


def _layers_unknown(validate: dict[str, Any], generate: dict[str, Any]) -> str:
    """The "not known" line: the bisect's own reason when it could not run, else why it did not."""
    sources = _layer_sources(validate, generate)
    for source, data in sources:
        if isinstance(data.get("divergence"), str) and data["divergence"].startswith("not located"):
            return f"per-layer error not known: {source}: {data['divergence']}"
    if validate.get("passed") is True or sources[-1][1].get("passed") is True:
        return "per-layer error not known: parity passed, and the first-divergence bisect runs only when it fails"
    return "no `per_layer_error` in validate.json or generate.json: per-layer error not known"


def _layer_x(row: dict[str, Any], last: int) -> float | None:
    layer = _num(row.get("layer"))
    if layer is not None:
        return layer
    return -1.0 if row.get("module") in BEFORE else float(last + 1) if row.get("module") else None


def _where(row: dict[str, Any]) -> str:
    module = str(row.get("module") or "?")
    return module if row.get("layer") is None else f"layer {row['layer']} {module}"


def _fmt(v: Any) -> str:
    n = _num(v)
    return "non-finite" if v is None else f"{n:.3g}" if n is not None else str(v)


def _layer_tables(found: LayerError | None) -> list[Table]:
    """The first divergence, then one row per layer (and per point outside the layers): its worst point, how far
    off, how many points exceed their tolerance."""
    if found is None:
        return []
    first, tables = found.first, []
    if first is not None:
        causes = "; ".join(str(c) for c in first.get("likely_cause") or []) or "no pattern recognised"
        header = ("where", "rel. error", "tolerance", "compared in", "likely cause", "from")
        compared_in = str(found.data.get("compared_in", "?"))
        row = (_where(first), _fmt(first.get("rel")), _fmt(first.get("tolerance")), compared_in, causes, found.source)
        tables.append(Table("First divergence", header, (row,)))
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in found.rows:
        groups.setdefault(str(row["layer"]) if row.get("layer") is not None else str(row.get("module")), []).append(row)
    rows = []
    for name, group in groups.items():
        top = max(group, key=lambda r: _layer_value(r) or 0.0)
        over = [r for r in group if _num(r.get("tolerance")) is not None and (_layer_value(r) or 0.0) > r["tolerance"]]
        marked = first is not None and any(
            r.get("module") == first.get("module") and r.get("layer") == first.get("layer") for r in group
        )
        mark = "← first divergence" if marked else ""
        worst_point = str(top.get("module") or "—")
        rows.append((name, worst_point, _fmt(_layer_value(top)), _fmt(top.get("tolerance")), str(len(over)), mark))
    header = ("layer", "worst point", "rel. error", "tolerance", "points beyond tolerance", "")
    return [*tables, Table("Per-layer error", header, tuple(rows))]


def _stage_table(results: StageResults) -> Table:
    rows = []
    for stage in STAGE_FILES:
        r = results.get(stage)
        if r is None:
            rows.append((stage, "—", "not run", "", ""))
            continue
        failed = [c.name for c in r.checks if not c.passed]
        verdict = "unreadable" if r.error else ("passed" if r.passed else "FAILED" if r.passed is False else "?")
        checks_passed = f"{len(r.checks) - len(failed)}/{len(r.checks)}"
        rows.append((stage, r.file, verdict, checks_passed, ", ".join(failed) or (r.error or "")))
    return Table("Stages", ("stage", "file", "result", "checks passed", "failed checks / problem"), tuple(rows))


def _perf_table(validate: dict[str, Any]) -> Table:
    perf = validate.get("performance") if isinstance(validate.get("performance"), dict) else {}
    rows = tuple((k, f"{_num(v):.4g}") for k, v in perf.items() if _num(v) is not None)
    return Table("Performance", ("metric", "value"), rows)


def _failed_table(results: StageResults) -> Table:
    rows = tuple(
        (stage, c.name, "required" if c.required else "optional", c.detail)
        for stage, c in results.all_checks()
        if not c.passed
    )
    return Table("Failed checks", ("stage", "check", "required", "detail"), rows)
