"""The onboarding report's load-replay section from validate.json's `check_data` (load_checks.py wrote it): one row
per condition with its verdict and latency, the prefix cache's figures, and plots of latency against concurrency and
TTFT with and without cache hits, as plain tuples (the report wraps them in its Plot / Table)."""

from __future__ import annotations

from typing import Any

from onboard import svg

PlotParts = tuple[str, str, str, str]
TableParts = tuple[str, tuple[str, ...], tuple[tuple[str, ...], ...]]
HEADER = ("condition", "requests", "failed", "TTFT p50 / p99 ms", "ITL p50 / p99 ms", "tokens/s", "verdict")


def section(validate: dict[str, Any]) -> tuple[list[PlotParts], list[TableParts]]:
    """(plots, tables); nothing when validate ran without --load."""
    data = validate.get("check_data") or {}
    serving = data.get("serving_under_load")
    if not isinstance(serving, dict) or not isinstance(serving.get("conditions"), list):
        return [], []
    conditions = [c for c in serving["conditions"] if isinstance(c, dict)]
    rows = [
        (
            str(c.get("name")),
            str(c.get("requests")),
            str(c.get("failed_requests")),
            f"{_fmt(c.get('ttft_p50_ms'))} / {_fmt(c.get('ttft_p99_ms'))}",
            f"{_fmt(c.get('itl_p50_ms'))} / {_fmt(c.get('itl_p99_ms'))}",
            _fmt(c.get("tokens_per_s")),
            "pass" if c.get("passed") else "FAIL: " + "; ".join(c.get("reasons") or ()),
        )
        for c in conditions
    ]
    causes = serving.get("causes") or []
    retried = serving.get("retried") or []
    rows.append(("causes", "", "", "", "", "", "; ".join(causes) or "none"))
    rows.append(("retried after an engine failure", str(len(retried)), "", "", "", "", ", ".join(map(str, retried))))
    cache = data.get("prefix_cache_hits")
    if isinstance(cache, dict):
        rate = cache.get("engine_hit_rate")
        rows.append(
            (
                "prefix cache",
                str(cache.get("responses_reporting")),
                "",
                f"hit {_fmt(cache.get('ttft_hit_p50_ms'))} / miss {_fmt(cache.get('ttft_miss_p50_ms'))} (p50)",
                "",
                "",
                f"engine hit rate {rate:.1%}" if isinstance(rate, (int, float)) else "engine hit rate not exported",
            )
        )
    preempted = data.get("preemption_under_load")
    if isinstance(preempted, dict) and isinstance(preempted.get("preemptions"), (int, float)):
        rows.append(("preempted (engine counter)", f"{preempted['preemptions']:.0f}", "", "", "", "", "preemptions"))
    tables: list[TableParts] = [(f"Serving under load ({serving.get('requests')} requests)", HEADER, tuple(rows))]
    return [p for p in (_latency_plot(conditions), _cache_plot(cache)) if p], tables


def _latency_plot(conditions: list[dict[str, Any]]) -> PlotParts | None:
    levels = sorted(
        (int(str(c["name"]).split()[-1]), c) for c in conditions if str(c.get("name", "")).startswith("concurrency ")
    )
    series = []
    for key, name in (("ttft_p50_ms", "TTFT p50"), ("ttft_p99_ms", "TTFT p99"), ("itl_p50_ms", "ITL p50")):
        points = tuple((float(n), float(c[key])) for n, c in levels if isinstance(c.get(key), (int, float)))
        if points:
            series.append(svg.Series(name, points))
    if not series:
        return None
    title = "Latency against concurrency"
    chart = svg.line_chart(title, series, "concurrent requests", "ms", log_y=True, log_x=True)
    caption = "Per concurrency level of the load replay: time to first token (p50, p99) and inter-token latency."
    return ("plot-load-latency", title, chart, caption)


def _cache_plot(cache: Any) -> PlotParts | None:
    if not isinstance(cache, dict):
        return None
    bars = [
        (label, float(cache[key]))
        for key, label in (("ttft_miss_p50_ms", "TTFT p50, cache miss"), ("ttft_hit_p50_ms", "TTFT p50, cache hit"))
        if isinstance(cache.get(key), (int, float))
    ]
    if not bars:
        return None
    title = "TTFT with and without prefix-cache hits"
    caption = (
        f"{cache.get('responses_with_hits')} of {cache.get('responses_reporting')} responses served partly from the "
        "prefix cache; misses come from the replay's lower concurrency levels only, hits from every level, so load is "
        "part of the difference."
    )
    return ("plot-load-cache", title, svg.bar_chart(title, bars, "ms"), caption)


def _fmt(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "—"
