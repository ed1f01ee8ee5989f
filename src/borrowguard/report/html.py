"""The self-contained HTML report: one file, inline CSS and SVG, readable offline and safe to mail.

It renders the JSON document of a verify run (`VerifyResult.to_dict()`), so a saved JSON can be turned
into a report later with `render_html(json.load(f))`.
"""

from __future__ import annotations

from html import escape
from typing import Any

from borrowguard.report.svg import event_strip, line_chart, stacked_bars

_COLOURS = {"2xx": "#2e7d32", "4xx": "#ef6c00", "5xx": "#c62828", "error": "#6a1b9a"}
_SEVERITY = {"critical": "#b71c1c", "error": "#c62828", "warning": "#ef6c00"}
_VERDICT = {"PASS": "#2e7d32", "FAIL": "#c62828", "ERROR": "#616161", "INCOMPLETE": "#616161"}

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:940px;
color:#212121}h1{font-size:22px;margin:0 0 4px}
h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}
h3{font-size:15px;margin:18px 0 6px}.badge{display:inline-block;color:#fff;padding:2px 12px;border-radius:4px;
font-weight:700}table{border-collapse:collapse;margin:6px 0;width:100%}
td,th{border:1px solid #ddd;padding:3px 7px;text-align:left;vertical-align:top}th{background:#f5f5f5}
td.n{text-align:right;font-variant-numeric:tabular-nums}
code,pre{font:12px ui-monospace,Menlo,Consolas,monospace}
pre{white-space:pre-wrap;word-break:break-all;margin:0}
svg .plot{fill:#fafafa;stroke:#ccc}svg .grid{stroke:#e0e0e0}svg .tick{font-size:10px;fill:#616161}
svg .lbl{font-size:11px;fill:#424242}ul.reasons li{margin:4px 0}.muted{color:#757575}
"""


def render_html(doc: dict[str, Any]) -> str:
    verdict = str(doc.get("verdict", "?"))
    target = doc.get("target") or {}
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width,initial-scale=1'>",
        f"<title>borrowguard verify: {escape(verdict)}</title><style>{_CSS}</style></head><body>",
        f"<h1>borrowguard verify <span class='badge' style='background:{_VERDICT.get(verdict, '#616161')}'>"
        f"{escape(verdict)}</span></h1>",
        f"<p class='muted'>{escape(str(doc.get('started_at', '')))} · {_fmt(doc.get('elapsed_s'))} s · "
        f"{escape(str(target.get('url', '')))} · model {escape(str(target.get('model', '')))}"
        + (
            " · bundled server, guard " + ("on" if target.get("server_guard") else "off")
            if target.get("bundled_server")
            else ""
        )
        + "</p>",
    ]
    parts.append(_reasons(doc))
    for level in doc.get("levels") or []:
        parts.append(_level(level, doc, multi=len(doc.get("levels") or []) > 1))
    parts.append(_findings(doc))
    parts.append(_context(doc))
    parts.append("</body></html>")
    return "\n".join(parts)


def _reasons(doc: dict[str, Any]) -> str:
    reasons = doc.get("reasons") or []
    out = ["<h2>Verdict</h2>"]
    if reasons:
        out.append("<ul class='reasons'>")
        for r in reasons:
            out.append(f"<li><code>{escape(str(r.get('code')))}</code> {escape(str(r.get('message')))}</li>")
        out.append("</ul>")
    elif doc.get("verdict") == "PASS":
        out.append(
            "<p>No tokenizer errors in the log, no engine death, every request answered 2xx, identical "
            "requests got identical <code>usage.prompt_tokens</code>, every scenario succeeded.</p>"
        )
    if doc.get("highest_passing_concurrency") is not None and len(doc.get("levels") or []) > 1:
        out.append(f"<p>Highest concurrency that passed: <b>{doc['highest_passing_concurrency']}</b></p>")
    for note in doc.get("notes") or []:
        out.append(f"<p class='muted'>Note: {escape(str(note))}</p>")
    return "\n".join(out)


def _level(level: dict[str, Any], doc: dict[str, Any], multi: bool) -> str:
    summary = level.get("summary") or {}
    series = level.get("series") or {}
    buckets = series.get("buckets") or []
    width = float(series.get("width_s") or 1.0)
    x_max = max(float(level.get("elapsed_s") or 0), len(buckets) * width, 1.0)
    title = f"Concurrency {level.get('concurrency')}" + (" — passed" if level.get("passed") else " — failed")
    out = [f"<h2>{escape(title)}</h2>"]
    out.append(
        f"<p>{summary.get('requests', 0)} requests, {summary.get('ok', 0)} ok, "
        f"{summary.get('errors', 0)} failed in {_fmt(level.get('elapsed_s'))} s "
        f"({_fmt(summary.get('requests_per_s'))} req/s)</p>"
    )
    out.append(_scenario_table(summary))
    mid = [(b["t"] + width / 2, b) for b in buckets]
    out.append(
        line_chart(
            [
                ("p50 latency", "#1565c0", [(t, _ms(b.get("p50"))) for t, b in mid]),
                ("p95 latency", "#ef6c00", [(t, _ms(b.get("p95"))) for t, b in mid]),
            ],
            x_max,
            "latency (ms)",
            "{:.0f}",
        )
    )
    out.append(
        stacked_bars(
            [(b["t"], b.get("classes") or {}) for b in buckets],
            width,
            x_max,
            list(_COLOURS.items()),
            f"responses per {width:g}s",
        )
    )
    out.append(
        line_chart(
            [("in flight (max)", "#00838f", [(t, b.get("inflight_max")) for t, b in mid])],
            x_max,
            "in-flight requests",
            "{:.0f}",
        )
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
    out.append(event_strip(events, x_max, "log findings and health"))
    out.append(_errors_table(summary))
    out.append(_repeats_table(summary))
    return "\n".join(out)


def _scenario_table(summary: dict[str, Any]) -> str:
    rows = [
        "<table><tr><th>scenario</th><th>requests</th><th>ok</th><th>statuses</th><th>p50 ms</th>"
        "<th>p95 ms</th><th>p99 ms</th><th>TTFT p50 ms</th><th>output tok/s</th></tr>"
    ]
    for name, s in (summary.get("scenarios") or {}).items():
        lat = s.get("latency_s") or {}
        ttft = s.get("ttft_s") or {}
        statuses = ", ".join(f"{escape(str(k))}: {v}" for k, v in (s.get("statuses") or {}).items())
        rows.append(
            f"<tr><td>{escape(str(name))}</td><td class='n'>{s.get('count', 0)}</td>"
            f"<td class='n'>{s.get('ok', 0)}</td>"
            f"<td>{statuses}</td><td class='n'>{_fmt(_ms(lat.get('p50')))}</td>"
            f"<td class='n'>{_fmt(_ms(lat.get('p95')))}</td><td class='n'>{_fmt(_ms(lat.get('p99')))}</td>"
            f"<td class='n'>{_fmt(_ms(ttft.get('p50')))}</td>"
            f"<td class='n'>{_fmt(s.get('output_tokens_per_s'))}</td></tr>"
        )
    rows.append("</table>")
    return "".join(rows)


def _errors_table(summary: dict[str, Any]) -> str:
    groups = summary.get("errors_by_status") or []
    if not groups:
        return ""
    rows = [
        "<h3>Failed requests</h3><table><tr><th>status</th><th>scenario</th><th>count</th><th>first at</th>"
        "<th>server's message</th></tr>"
    ]
    for g in groups:
        messages = "<br>".join(f"<pre>{escape(str(m))}</pre>" for m in g.get("messages") or [])
        rows.append(
            f"<tr><td>{escape(str(g.get('status')))}</td><td>{escape(str(g.get('scenario')))}</td>"
            f"<td class='n'>{g.get('count')}</td><td class='n'>{_fmt(g.get('first_t'))} s</td>"
            f"<td>{messages}</td></tr>"
        )
    rows.append("</table>")
    return "".join(rows)


def _repeats_table(summary: dict[str, Any]) -> str:
    repeats = summary.get("repeats") or {}
    if not repeats:
        return ""
    rows = [
        "<h3>Identical requests</h3><table><tr><th>request</th><th>usage.prompt_tokens (times seen)</th>"
        "<th>consistent</th></tr>"
    ]
    for key, r in repeats.items():
        values = ", ".join(f"{escape(str(v))} ({n}×)" for v, n in (r.get("prompt_tokens") or {}).items())
        if r.get("without_usage"):
            values += f" · {r['without_usage']} without usage"
        ok = "yes" if r.get("consistent") else "<b style='color:#c62828'>NO</b>"
        rows.append(f"<tr><td>{escape(str(key))}</td><td>{values}</td><td>{ok}</td></tr>")
    rows.append("</table>")
    return "".join(rows)


def _findings(doc: dict[str, Any]) -> str:
    log = doc.get("log") or {}
    counts = log.get("finding_counts") or {}
    out = [f"<h2>Server log</h2><p>{log.get('lines', 0)} lines read.</p>"]
    if counts:
        out.append("<table><tr><th>finding</th><th>count</th></tr>")
        out += [f"<tr><td>{escape(str(k))}</td><td class='n'>{v}</td></tr>" for k, v in counts.items()]
        out.append("</table>")
    findings = log.get("findings") or []
    if findings:
        out.append("<h3>First findings</h3><table><tr><th>t</th><th>id</th><th>source</th><th>line</th></tr>")
        for f in findings[:50]:
            out.append(
                f"<tr><td class='n'>{_fmt(f.get('t'))} s</td><td>{escape(str(f.get('id')))}</td>"
                f"<td>{escape(str(f.get('source')))}:{escape(str(f.get('line_no')))}</td>"
                f"<td><pre>{escape(str(f.get('text')))}</pre></td></tr>"
            )
        out.append("</table>")
    return "\n".join(out)


def _context(doc: dict[str, Any]) -> str:
    out = ["<h2>Run</h2><table>"]
    for section in ("config", "environment", "health"):
        for k, v in (doc.get(section) or {}).items():
            out.append(
                f"<tr><th>{escape(section)}.{escape(str(k))}</th><td><code>{escape(str(v))}</code></td></tr>"
            )
    out.append("</table>")
    metrics = doc.get("metrics")
    if metrics:
        before, after = metrics.get("before") or {}, metrics.get("after") or {}
        out.append("<h3>/metrics</h3><table><tr><th>series</th><th>before</th><th>after</th></tr>")
        for name in list(dict.fromkeys([*before, *after]))[:40]:
            out.append(
                f"<tr><td><code>{escape(name)}</code></td><td class='n'>{_fmt(before.get(name))}</td>"
                f"<td class='n'>{_fmt(after.get(name))}</td></tr>"
            )
        out.append("</table>")
    out.append(f"<p class='muted'>schema {escape(str(doc.get('schema')))} · generated by borrowguard</p>")
    return "\n".join(out)


def _ms(seconds: Any) -> float | None:
    return None if not isinstance(seconds, int | float) else seconds * 1000


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
    return escape(str(value))
