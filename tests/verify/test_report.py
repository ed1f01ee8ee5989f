"""The JSON and HTML reports: complete, self-contained, and safe with hostile text from logs and servers."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from borrowguard.load.client import Outcome
from borrowguard.load.metrics import LoadMetrics
from borrowguard.report import render_html, to_json, write_html
from borrowguard.verify import LevelResult, Reason, VerifyConfig, VerifyResult
from borrowguard.verify.preflight import Target
from borrowguard.verify.watch import LogEvent

EVIL = "<script>alert('x')</script><img src=http://evil.example/x.png>"


def _level(concurrency: int, seconds: int = 20, fail_at: int | None = None) -> LevelResult:
    m = LoadMetrics(["text", "image", "tools"])
    for i in range(seconds * 10):
        t = i / 10
        scenario = ("text", "image", "tools")[i % 3]
        m.started(t)
        status = 500 if fail_at is not None and t >= fail_at and i % 4 == 0 else 200
        key = f"{scenario}/plain" if i % 7 == 0 else None
        out = Outcome(scenario, key, None, start=t, latency=0.02 + (i % 9) / 100, status=status,
                      message=EVIL if status == 500 else None, prompt_tokens=100, completion_tokens=8,
                      ttft=0.01)  # fmt: skip
        m.finished(out)
    m.finding(fail_at or 1.0, "tokenizer-already-borrowed")
    m.health_failure(3.0)
    reasons = [Reason("request-errors", f"5 × 500 ({EVIL})", concurrency)] if fail_at is not None else []
    return LevelResult(concurrency, float(seconds), m.summary(seconds), m.series.summary(), reasons)


def _doc(levels: list[LevelResult], verdict: str = "FAIL") -> dict:
    result = VerifyResult(
        verdict=verdict,
        reasons=[r for lvl in levels for r in lvl.reasons],
        config=VerifyConfig(url="http://127.0.0.1:8000"),
        levels=levels,
        target=Target("http://127.0.0.1:8000", bundled_server=False, model=EVIL),
        findings=[LogEvent(12.0, 0, "tokenizer-already-borrowed", "error", "s.log", 7, EVIL)],
        finding_counts={"tokenizer-already-borrowed": 1},
        log_lines=99,
        notes=[EVIL],
        started_at="2026-01-01T00:00:00+00:00",
        elapsed=21.0,
    )
    return result.to_dict()


def test_html_is_self_contained_and_escapes_everything(tmp_path: Path) -> None:
    doc = _doc([_level(16, fail_at=10)])
    page = render_html(doc)
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "<script" not in page and "<img" not in page  # the hostile text is shown, escaped, never live
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in page  # markupsafe's spelling of '
    assert html.unescape(page).count(EVIL) >= 5  # shown as text: model, reason, note, message, finding
    # nothing to fetch: no scripts, stylesheets, images or fonts from anywhere
    fetches = r"<(link|script|iframe|object|embed)\b|@import|url\(|<[^>]*\b(src|href)="
    assert not re.search(fetches, page, re.I)
    assert page.count("<svg") == 4
    assert "FAIL" in page and "request-errors" in page and "tokenizer-already-borrowed" in page
    # the 500s start at t=10s: the status chart has red bars only from there on
    red = [float(m) for m in re.findall(r'<rect x="[\d.]+" [^>]*fill="#c62828"><title>(\d+)s 5xx', page)]
    assert red and min(red) >= 10
    # log findings and health failures sit on the same time axis, from the exact per-second counts
    assert "<title>10.5s tokenizer-already-borrowed × 1</title>" in page
    assert "<title>3.5s health check failed × 1</title>" in page
    write_html(doc, tmp_path / "r.html")
    assert (tmp_path / "r.html").read_text() == page
    assert not list(tmp_path.glob("*.tmp"))


def test_json_round_trip_renders_the_same(tmp_path: Path) -> None:
    doc = _doc([_level(8), _level(16, fail_at=5)])
    (tmp_path / "r.json").write_text(to_json(doc) + "\n")  # what `verify --json > r.json` saves
    loaded = json.loads((tmp_path / "r.json").read_text())
    assert render_html(loaded) == render_html(doc)
    assert loaded["highest_passing_concurrency"] == 8
    assert "Highest concurrency that passed: <b>8</b>" in render_html(loaded)
    level = loaded["levels"][1]
    assert level["summary"]["scenarios"]["text"]["latency_s"]["p50"] > 0
    assert sum(b["count"] for b in level["series"]["buckets"]) == level["summary"]["requests"]


def test_a_run_that_never_started_still_renders() -> None:
    doc = VerifyResult(
        "ERROR", [Reason("could-not-run", "cannot reach http://127.0.0.1:9")], VerifyConfig()
    ).to_dict()
    page = render_html(doc)
    assert "ERROR" in page and "could-not-run" in page and page.count("<svg") == 0
    assert doc["exit_code"] == 2 and doc["levels"] == []


def test_charts_are_markup_with_every_label_escaped() -> None:
    from markupsafe import Markup

    from borrowguard.report.svg import event_strip, line_chart, stacked_bars

    charts = [
        event_strip([(1.0, EVIL, "#000", 2)], 10.0, EVIL),
        line_chart([(EVIL, "#111", [(0.5, 1.0), (1.5, None), (2.5, 3.0)])], 10.0, EVIL),
        stacked_bars([(0.0, {EVIL: 3})], 1.0, 10.0, [(EVIL, "#222")], EVIL),
    ]
    for chart in charts:
        assert isinstance(chart, Markup)  # the templates insert it as is: it must be escaped already
        assert "<script" not in chart and "<img" not in chart
        assert chart.count("&lt;script&gt;") >= 2
