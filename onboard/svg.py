"""Tiny inline-SVG charts (line charts, optionally log-scaled, and horizontal bars) for the offline HTML reports:
no JavaScript, no external fonts, so a report opens from a file on a machine without network."""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

COLORS = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4b5563", "#ca8a04")
W, H = 520, 270
LEFT, RIGHT, TOP, BOTTOM = 72, 16, 28, 44


@dataclass(frozen=True)
class Series:
    name: str
    points: tuple[tuple[float, float], ...]


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1e5 or abs(v) < 1e-2:
        return f"{v:.0e}".replace("e-0", "e-").replace("e+0", "e")
    return str(int(v)) if v == int(v) else f"{v:.3g}"


def _log_ticks(lo: int, hi: int) -> list[float]:
    """Decades, plus 2× and 5× marks when the axis spans two decades or fewer (else it shows two labels)."""
    subs = (1, 2, 5) if hi - lo <= 2 else (1,)
    return [math.log10(m) + d for d in range(lo, hi + 1) for m in subs if math.log10(m) + d <= hi]


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    step = 10 ** math.floor(math.log10((hi - lo) / n))
    for mult in (1, 2, 5, 10):
        if (hi - lo) / (step * mult) <= n:
            step *= mult
            break
    start = math.ceil(lo / step) * step
    return [start + i * step for i in range(int((hi - start) / step) + 1)]


def line_chart(
    title: str,
    series: list[Series],
    x_label: str,
    y_label: str,
    log_y: bool = False,
    log_x: bool = False,
    marker: tuple[float, str] | None = None,
) -> str:
    """A line chart; with `log_y` the y axis is log10 (zeros and negatives sit on the floor); `log_x` likewise
    for positive x (prompt lengths that double). `marker` (x, label): a labelled vertical line (linear x only)."""
    x_is_log = log_x and all(x > 0 for s in series for x, _ in s.points)
    if x_is_log:
        series = [Series(s.name, tuple((math.log10(x), y) for x, y in s.points)) for s in series]
        x_label, marker = x_label + " (log)", None
    pts = [p for s in series for p in s.points]
    if not pts:
        return ""
    positives = [y for _, y in pts if y > 0]
    log_y = log_y and bool(positives)
    floor = min(positives) / 10 if log_y else 0.0

    def ty(y: float) -> float:
        return math.log10(max(y, floor)) if log_y else y

    xs = [x for x, _ in pts]
    ys = [ty(y) for _, y in pts]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys), max(ys)
    if log_y:
        y0, y1 = math.floor(y0), math.ceil(y1) if math.ceil(y1) > math.floor(y0) else math.floor(y0) + 1
    else:
        y0, y1 = min(0.0, y0), (y1 if y1 > y0 else y0 + 1) * 1.05
    x1 = x1 if x1 > x0 else x0 + 1

    def sx(x: float) -> float:
        return LEFT + (x - x0) / (x1 - x0) * (W - LEFT - RIGHT)

    def sy(v: float) -> float:
        return H - BOTTOM - (v - y0) / (y1 - y0) * (H - TOP - BOTTOM)

    out = [_open(title, "line", len(pts))]
    yticks = _log_ticks(int(y0), int(y1)) if log_y else _ticks(y0, y1)
    for t in yticks:
        label = _fmt(10**t) if log_y else _fmt(t)
        out.append(f'<line class="grid" x1="{LEFT}" x2="{W - RIGHT}" y1="{sy(t):.1f}" y2="{sy(t):.1f}"/>')
        out.append(f'<text class="tick" x="{LEFT - 6}" y="{sy(t) + 4:.1f}" text-anchor="end">{label}</text>')
    xticks = [t for t in _log_ticks(math.floor(x0), math.ceil(x1)) if x0 <= t <= x1] if x_is_log else _ticks(x0, x1, 7)
    if not x_is_log and all(float(x).is_integer() for x in xs):
        xticks = [t for t in xticks if float(t).is_integer()]  # layers and positions are whole numbers
    for t in xticks:
        label = _fmt(round(10**t)) if x_is_log else _fmt(t)
        out.append(f'<text class="tick" x="{sx(t):.1f}" y="{H - BOTTOM + 16}" text-anchor="middle">{label}</text>')
    out.append(_axes(x_label, y_label + (" (log)" if log_y else "")))
    if marker is not None and x0 <= marker[0] <= x1:
        mx = sx(marker[0])
        anchor, dx = ("end", -4) if mx > (LEFT + W - RIGHT) / 2 else ("start", 4)
        out.append(
            f'<line class="limit marker" x1="{mx:.1f}" x2="{mx:.1f}" y1="{TOP}" y2="{H - BOTTOM}" '
            'stroke="#dc2626" stroke-dasharray="4 3"/>'
            f'<text class="tick" x="{mx + dx:.1f}" y="{H - BOTTOM - 6}" text-anchor="{anchor}">'
            f"{escape(marker[1])}</text>"
        )
    lx = LEFT + 8
    for i, s in enumerate(series):
        color = COLORS[i % len(COLORS)]
        coords = " ".join(f"{sx(x):.1f},{sy(ty(y)):.1f}" for x, y in sorted(s.points))
        out.append(
            f'<polyline class="series" data-name="{escape(s.name)}" data-points="{len(s.points)}" '
            f'fill="none" stroke="{color}" stroke-width="1.6" points="{coords}"/>'
        )
        if len(s.points) <= 40:
            for x, y in s.points:
                out.append(
                    f'<circle cx="{sx(x):.1f}" cy="{sy(ty(y)):.1f}" r="2.6" fill="{color}">'
                    f"<title>{escape(s.name)}: x={_fmt(10**x if x_is_log else x)}, y={_fmt(y)}</title></circle>"
                )
        name = s.name[:28]
        out.append(
            f'<rect x="{lx}" y="8" width="10" height="10" fill="{color}"/>'
            f'<text class="legend" x="{lx + 14}" y="17">{escape(name)}</text>'
        )
        lx += 30 + 6.5 * len(name)
    out.append("</svg>")
    return "\n".join(out)


def bar_chart(title: str, bars: list[tuple[str, float]], unit: str, limit: tuple[str, float] | None = None) -> str:
    """Horizontal bars with values; `limit` draws a labelled vertical line (e.g. the GPU memory)."""
    if not bars:
        return ""
    label_w = 190
    row = 30
    height = TOP + row * len(bars) + BOTTOM
    if limit and limit[1] > 4 * max(v for _, v in bars):
        limit = None  # a line far off to the right squeezes the bars to nothing; the caption states it instead
    top = max([v for _, v in bars] + ([limit[1]] if limit else [])) or 1.0

    def sx(v: float) -> float:
        return label_w + v / top * (W - label_w - RIGHT - 70)

    out = [_open(title, "bar", len(bars), height)]
    for i, (name, value) in enumerate(bars):
        y = TOP + i * row
        color = COLORS[i % len(COLORS)]
        out.append(f'<text class="tick" x="{label_w - 8}" y="{y + 18}" text-anchor="end">{escape(name)}</text>')
        out.append(
            f'<rect class="bar" data-value="{value}" x="{label_w}" y="{y + 5}" width="{max(sx(value) - label_w, 1):.1f}" '
            f'height="{row - 10}" fill="{color}"><title>{escape(name)}: {_fmt(value)} {unit}</title></rect>'
        )
        out.append(f'<text class="tick" x="{sx(value) + 6:.1f}" y="{y + 18}">{_fmt(value)} {escape(unit)}</text>')
    if limit:
        x = sx(limit[1])
        out.append(
            f'<line class="limit" x1="{x:.1f}" x2="{x:.1f}" y1="{TOP - 6}" y2="{height - BOTTOM + 6}"/>'
            f'<text class="tick" x="{x:.1f}" y="{TOP - 10}" text-anchor="middle">{escape(limit[0])}</text>'
        )
    out.append("</svg>")
    return "\n".join(out)


def _open(title: str, kind: str, n: int, height: int = H) -> str:
    return (
        f'<svg class="plot" data-kind="{kind}" data-count="{n}" xmlns="http://www.w3.org/2000/svg" '
        f'viewBox="0 0 {W} {height}" width="{W}" height="{height}" role="img" aria-label="{escape(title)}">'
        f"<title>{escape(title)}</title>"
    )


def _axes(x_label: str, y_label: str) -> str:
    return (
        f'<line class="axis" x1="{LEFT}" x2="{W - RIGHT}" y1="{H - BOTTOM}" y2="{H - BOTTOM}"/>'
        f'<line class="axis" x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{H - BOTTOM}"/>'
        f'<text class="label" x="{(LEFT + W - RIGHT) / 2}" y="{H - 8}" text-anchor="middle">{escape(x_label)}</text>'
        f'<text class="label" transform="translate(16,{(TOP + H - BOTTOM) / 2}) rotate(-90)" '
        f'text-anchor="middle">{escape(y_label)}</text>'
    )
