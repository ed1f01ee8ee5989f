"""The self-contained HTML report: one file, inline CSS and SVG, readable offline and safe to mail.

It renders the JSON document of a verify run (`VerifyResult.to_dict()`), so a saved JSON can be turned
into a report later with `render_html(json.load(f))`. The page is composed of Jinja templates
(templates/*.html) with autoescaping on: every value of the document is text to show, never markup,
whatever a hostile server or log put in it. The charts are SVG built in svg.py, already escaped.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jinja2 import Environment
    from markupsafe import Markup

_COLOURS = {"2xx": "#2e7d32", "4xx": "#ef6c00", "5xx": "#c62828", "error": "#6a1b9a"}
_SEVERITY = {"critical": "#b71c1c", "error": "#c62828", "warning": "#ef6c00"}
_VERDICT = {"PASS": "#2e7d32", "FAIL": "#c62828", "ERROR": "#616161", "INCOMPLETE": "#616161"}


def render_html(doc: dict[str, Any]) -> str:
    """A verify run's report; given a fleet's document (`borrowguard.verify-fleet/1`), the fleet's."""
    if str(doc.get("schema", "")).startswith("borrowguard.verify-fleet/"):
        return _environment().get_template("fleet.html").render(fleet=doc)
    return _environment().get_template("report.html").render(doc=doc)


@functools.lru_cache(maxsize=1)
def _environment() -> Environment:
    # jinja2 comes with the [load] and [server] extras: imported on first use, so that importing
    # borrowguard.report (to write JSON) needs nothing beyond the core dependencies.
    from jinja2 import Environment, PackageLoader, StrictUndefined

    env = Environment(
        loader=PackageLoader("borrowguard.report", "templates"),
        autoescape=True,  # every template here is HTML: escape whatever the document holds
        undefined=StrictUndefined,  # a misspelt name in a template fails the tests, not silently blank
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(fmt=_fmt, ms=_ms)
    env.globals.update(level_charts=level_charts, series_names=_series_names, verdict_colour=_verdict_colour)
    return env


def level_charts(level: dict[str, Any], doc: dict[str, Any]) -> list[Markup]:
    """The four charts of a level on one time axis: latency, responses by class, in flight, events."""
    from borrowguard.report.svg import event_strip, line_chart, stacked_bars  # markupsafe: see _environment

    series = level.get("series") or {}
    buckets = series.get("buckets") or []
    width = float(series.get("width_s") or 1.0)
    x_max = max(float(level.get("elapsed_s") or 0), len(buckets) * width, 1.0)
    mid = [(b["t"] + width / 2, b) for b in buckets]
    latency = line_chart(
        [
            ("p50 latency", "#1565c0", [(t, _ms(b.get("p50"))) for t, b in mid]),
            ("p95 latency", "#ef6c00", [(t, _ms(b.get("p95"))) for t, b in mid]),
        ],
        x_max,
        "latency (ms)",
        "{:.0f}",
    )
    classes = stacked_bars(
        [(b["t"], b.get("classes") or {}) for b in buckets],
        width,
        x_max,
        list(_COLOURS.items()),
        f"responses per {width:g}s",
    )
    inflight = line_chart(
        [("in flight (max)", "#00838f", [(t, b.get("inflight_max")) for t, b in mid])],
        x_max,
        "in-flight requests",
        "{:.0f}",
    )
    # from the time series (exact counts), not from the findings list (a bounded sample)
    severity = {
        str(f.get("id")): str(f.get("severity")) for f in (doc.get("log") or {}).get("findings") or []
    }
    events = [
        (b["t"] + width / 2, str(rule), _SEVERITY.get(severity.get(str(rule), ""), "#455a64"), int(n))
        for b in buckets
        for rule, n in (b.get("findings") or {}).items()
    ]
    events += [
        (b["t"] + width / 2, "health check failed", "#b71c1c", int(b["health_failures"]))
        for b in buckets
        if b.get("health_failures")
    ]
    return [latency, classes, inflight, event_strip(events, x_max, "log findings and health")]


def _series_names(before: dict[str, Any], after: dict[str, Any], limit: int) -> list[str]:
    return list(dict.fromkeys([*before, *after]))[:limit]


def _verdict_colour(verdict: str) -> str:
    return _VERDICT.get(verdict, "#616161")


def _ms(seconds: Any) -> float | None:
    return None if not isinstance(seconds, int | float) else seconds * 1000


def _fmt(value: Any) -> str:
    # Plain text, not markup: autoescape escapes whatever comes out of here.
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
    return str(value)
