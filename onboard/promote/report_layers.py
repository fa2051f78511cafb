"""The report's per-layer error: where the adapter and the reference first part ways.

Read from the stage results' structured fields (onboard/generate_adapter/divergence_stages.py): `per_layer_error`
[{layer, module, max_abs, rel, tolerance}] and `first_divergence` {layer, module, rel, tolerance, likely_cause},
in validate.json, or generate.json (top level or its `parity`). Points outside the decoder layers have layer null:
the embedding is drawn before layer 0, the final norm and logits after the last layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from onboard import svg

# Value of a row, first key present: the bisect's `rel`, then older per-layer formats.
ERROR_KEYS = ("rel", "max_abs_error", "max_error", "error", "max_logprob_error", "kl")
BEFORE = ("embedding",)  # model-level points that run before layer 0; the others run after the last layer


@dataclass(frozen=True)
class LayerError:
    source: str
    rows: list[dict[str, Any]]
    first: dict[str, Any] | None
    data: dict[str, Any]


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _value(row: dict[str, Any]) -> float | None:
    return next((_num(row[k]) for k in ERROR_KEYS if _num(row.get(k)) is not None), None)


def find(validate: dict[str, Any], generate: dict[str, Any]) -> LayerError | None:
    """The first stage result carrying usable per-layer rows: validate.json, generate.json, generate's parity."""
    parity = generate.get("parity") if isinstance(generate.get("parity"), dict) else {}
    for source, data in (("validate.json", validate), ("generate.json", generate), ("generate.json parity", parity)):
        rows = data.get("per_layer_error")
        rows = [r for r in rows if isinstance(r, dict) and _value(r) is not None] if isinstance(rows, list) else []
        if rows:
            first = data.get("first_divergence") if isinstance(data.get("first_divergence"), dict) else None
            return LayerError(source, rows, first, data)
    return None


def why_unknown(validate: dict[str, Any], generate: dict[str, Any]) -> str:
    """The "not known" line: the bisect's own reason when it could not run, else why it did not."""
    parity = generate.get("parity") if isinstance(generate.get("parity"), dict) else {}
    for source, data in (("validate.json", validate), ("generate.json", generate), ("generate.json parity", parity)):
        if isinstance(data.get("divergence"), str) and data["divergence"].startswith("not located"):
            return f"per-layer error not known: {source}: {data['divergence']}"
    if validate.get("passed") is True or parity.get("passed") is True:
        return "per-layer error not known: parity passed, and the first-divergence bisect runs only when it fails"
    return "no `per_layer_error` in validate.json or generate.json: per-layer error not known"


def _x(row: dict[str, Any], last: int) -> float | None:
    layer = _num(row.get("layer"))
    if layer is not None:
        return layer
    return -1.0 if row.get("module") in BEFORE else float(last + 1) if row.get("module") else None


def plot(found: LayerError) -> tuple[str, str]:
    """(svg, caption): the worst relative error per layer (log scale), the tolerance, the first divergence marked."""
    last = int(max((_num(r.get("layer")) or 0.0) for r in found.rows))
    worst: dict[float, float] = {}
    for row in found.rows:
        x, value = _x(row, last), _value(row)
        if x is not None and value is not None:
            worst[x] = max(worst.get(x, 0.0), value)
    series = [svg.Series("worst error per layer", tuple(sorted(worst.items())))]
    tol = _num(found.data.get("point_tolerance"))
    if tol is not None and len(worst) > 1:
        series.append(svg.Series("tolerance", ((min(worst), tol), (max(worst), tol))))
    marker, caption = None, f"from {found.source}; no point beyond tolerance"
    first = found.first
    if first is not None and _x(first, last) is not None:
        where = _where(first)
        marker = (_x(first, last), f"first divergence: {where}")
        caption = f"from {found.source}; first divergence at {where}"
    elif worst:
        top = max(worst.items(), key=lambda kv: kv[1])
        caption = f"from {found.source}; largest at layer {int(top[0])}: {top[1]:.3g}"
    label = "rel. error (max|Δ|/max|ref|)" if "rel" in found.rows[0] else "error"
    chart = svg.line_chart(
        "Per-layer error", series, "layer (embedding before 0, head after the last)", label, log_y=True, marker=marker
    )
    return chart, caption


def _where(row: dict[str, Any]) -> str:
    module = str(row.get("module") or "?")
    return module if row.get("layer") is None else f"layer {row['layer']} {module}"


def _fmt(v: Any) -> str:
    n = _num(v)
    return "non-finite" if v is None else f"{n:.3g}" if n is not None else str(v)


def table_rows(found: LayerError) -> tuple[tuple[str, ...], ...]:
    """One row per layer (and per point outside the layers): its worst point, how far off, how many exceed."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in found.rows:
        groups.setdefault(str(row["layer"]) if row.get("layer") is not None else str(row.get("module")), []).append(row)
    out = []
    for name, rows in groups.items():
        top = max(rows, key=lambda r: _value(r) or 0.0)
        over = [r for r in rows if _num(r.get("tolerance")) is not None and (_value(r) or 0.0) > r["tolerance"]]
        marked = found.first is not None and any(
            r.get("module") == found.first.get("module") and r.get("layer") == found.first.get("layer") for r in rows
        )
        out.append(
            (
                name,
                str(top.get("module") or "—"),
                _fmt(_value(top)),
                _fmt(top.get("tolerance")),
                str(len(over)),
                "← first divergence" if marked else "",
            )
        )
    return tuple(out)


def first_rows(found: LayerError) -> tuple[tuple[str, ...], ...]:
    first = found.first
    if first is None:
        return ()
    causes = "; ".join(str(c) for c in first.get("likely_cause") or []) or "no pattern recognised"
    return (
        (
            _where(first),
            _fmt(first.get("rel")),
            _fmt(first.get("tolerance")),
            str(found.data.get("compared_in", "?")),
            causes,
            found.source,
        ),
    )
