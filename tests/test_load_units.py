"""Unit tests of the load pieces that need no server: parsing, SSE, histograms, scenarios, metrics."""

from __future__ import annotations

import json
import random

import pytest

from borrowguard.errors import UserInputError
from borrowguard.load.client import ChatClient, Outcome, error_message
from borrowguard.load.metrics import LogHistogram, Metrics, TimeSeries
from borrowguard.load.options import parse_duration, parse_image_sizes, parse_levels, parse_mix
from borrowguard.load.scenarios import TOOLS, RequestFactory, ScenarioSettings
from borrowguard.load.sse import SSEError, SSEParser

# -- options ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("5m", 300), ("1h", 3600), ("250ms", 0.25), ("12", 12), (" 2.5 S ", 2.5)],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "abc", "-5s", "0s", "5 minutes", "1d"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(UserInputError):
        parse_duration(text)


def test_parse_duration_zero_allowed_for_ramp_up() -> None:
    assert parse_duration("0s", allow_zero=True) == 0


def test_parse_lists() -> None:
    assert parse_image_sizes("256x256, 720X1280") == [(256, 256), (720, 1280)]
    assert parse_mix("text=2,image=0,tools") == {"text": 2.0, "tools": 1.0}
    assert parse_levels("8,16,32") == [8, 16, 32]
    for bad in ("256", "8x8", "100000x10", ""):
        with pytest.raises(UserInputError):
            parse_image_sizes(bad)
    for bad in ("audio=1", "text=x", "text=0", "text=-1"):
        with pytest.raises(UserInputError):
            parse_mix(bad)
    for bad in ("0", "8,a", ""):
        with pytest.raises(UserInputError):
            parse_levels(bad)


# -- SSE -------------------------------------------------------------------------------------------------

STREAM = (
    b": ping\r\n\r\n"
    b'data: {"choices":[{"delta":{"content":"h\xc3\xa9"}}]}\r\n\r\n'
    b"event: message\nid: 7\n"
    b'data:{"usage":{"prompt_tokens":5}}\n\n'
    b"data: [DONE]"  # no final newline: close() must still return it
)
EXPECTED = ['{"choices":[{"delta":{"content":"hé"}}]}', '{"usage":{"prompt_tokens":5}}', "[DONE]"]


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, len(STREAM)])
def test_sse_parser_any_split(chunk: int) -> None:
    parser = SSEParser()
    got: list[str] = []
    for i in range(0, len(STREAM), chunk):
        got += parser.feed(STREAM[i : i + chunk])
    got += parser.close()
    assert got == EXPECTED


def test_sse_parser_bounds_a_line_without_end() -> None:
    parser = SSEParser(max_line=1000)
    parser.feed(b"data: " + b"x" * 900)
    with pytest.raises(SSEError):
        parser.feed(b"x" * 200)


# -- histogram and time series ---------------------------------------------------------------------------


def test_log_histogram_percentiles_close_to_exact() -> None:
    rng = random.Random(5)
    values = [rng.lognormvariate(-3, 1.2) for _ in range(20_000)]
    hist = LogHistogram()
    for v in values:
        hist.add(v)
    values.sort()
    for q in (50, 90, 95, 99):
        exact = values[int(q / 100 * len(values)) - 1]
        assert hist.percentile(q) == pytest.approx(exact, rel=0.045)
    assert hist.max == values[-1] and hist.count == len(values)
    assert len(hist._counts) < 600  # bounded by the value range, not by the number of samples


def test_time_series_coarsens_instead_of_growing() -> None:
    series = TimeSeries(max_buckets=100)
    for second in range(1000):
        bucket = series.at(second + 0.5)
        bucket.count += 1
        bucket.latency.add(0.01)
    assert len(series.buckets) <= 100
    assert series.width == 16
    assert sum(b.count for b in series.buckets) == 1000
    assert sum(b.latency.count for b in series.buckets) == 1000


# -- metrics ---------------------------------------------------------------------------------------------


def _outcome(scenario: str = "text", **kw) -> Outcome:
    base = {"repeat_key": None, "truncate": None, "start": 0.1, "latency": 0.05, "status": 200}
    base.update(kw)
    return Outcome(scenario, **base)


def test_metrics_detects_inconsistent_repeats_and_groups_errors() -> None:
    m = Metrics(["text", "image"])
    for tokens in (120, 120, 120, 97):
        m.started(0.1)
        m.finished(_outcome(repeat_key="text/plain", prompt_tokens=tokens, completion_tokens=4))
    m.started(0.1)
    m.finished(_outcome("image", repeat_key="image/plain", prompt_tokens=50))
    for i in range(50):
        m.started(0.2)
        m.finished(_outcome("image", status=500, message=f"RuntimeError: Already borrowed #{i % 5}"))
    s = m.summary(elapsed=2.0)
    assert s["requests"] == 55 and s["ok"] == 5 and s["errors"] == 50 and m.inflight == 0
    assert s["repeats"]["text/plain"]["consistent"] is False
    assert s["repeats"]["text/plain"]["prompt_tokens"] == {"97": 1, "120": 3}
    assert s["repeats"]["image/plain"]["consistent"] is True
    (group,) = s["errors_by_status"]
    assert group["status"] == "500" and group["scenario"] == "image" and group["count"] == 50
    assert len(group["messages"]) == 3  # bounded sample of distinct messages
    assert s["scenarios"]["image"]["statuses"] == {"200": 1, "500": 50}


def test_outcome_labels() -> None:
    assert _outcome().ok and _outcome().label == "200"
    assert _outcome(status=503).label == "503"
    assert _outcome(status=200, error="bad-sse").label == "bad-sse"
    assert not _outcome(status=200, error="stream-cut").ok
    assert _outcome(status=None, error="refused").label == "refused"


# -- scenarios -------------------------------------------------------------------------------------------


def test_factory_repeats_are_identical_and_unique_requests_differ() -> None:
    factory = RequestFactory(ScenarioSettings(image_sizes=((64, 48),), images_per_request=2), "m")
    built = [factory.build(factory.plan()) for _ in range(60)]
    by_key: dict[str, set[bytes]] = {}
    unique_images: list[str] = []
    for b in built:
        body = json.loads(b.body)
        assert body["model"] == "m"
        if b.plan.repeat_key:
            by_key.setdefault(b.plan.repeat_key, set()).add(b.body)
        elif b.plan.scenario == "image":
            urls = [p["image_url"]["url"] for p in body["messages"][0]["content"] if p["type"] == "image_url"]
            assert len(urls) == 2 and all(
                u.startswith(("data:image/png;base64,", "data:image/jpeg;base64,")) for u in urls
            )
            unique_images += urls
        if b.plan.scenario == "tools":
            assert body["tool_choice"] == "required" and body["tools"] == TOOLS
            assert sum(m["role"] == "tool" for m in body["messages"]) == 2
    assert set(by_key) == {"text/plain", "text/trunc", "image/plain", "tools/plain", "tools/trunc"}
    assert all(len(bodies) == 1 for bodies in by_key.values())
    assert len(set(unique_images)) == len(unique_images) > 10  # no two requests share an image
    truncated = {b.plan.scenario for b in built if "truncate_prompt_tokens" in json.loads(b.body)}
    assert truncated == {"text", "tools"}  # never an image prompt: that could cut its placeholders


def test_factory_without_extensions_and_with_weights() -> None:
    settings = ScenarioSettings(mix={"text": 3, "tools": 1}, vllm_extensions=False, tool_result_bytes=5000)
    factory = RequestFactory(settings, "m")
    plans = [factory.plan() for _ in range(400)]
    counts = {s: sum(p.scenario == s for p in plans) for s in ("text", "image", "tools")}
    assert counts == {"text": 300, "image": 0, "tools": 100}
    for plan in plans[:40]:
        body = json.loads(factory.build(plan).body)
        assert "truncate_prompt_tokens" not in body
        if plan.scenario == "tools":
            assert all(len(m["content"]) == 5000 for m in body["messages"] if m["role"] == "tool")


def test_stream_requests_ask_for_usage() -> None:
    factory = RequestFactory(ScenarioSettings(stream=True, mix={"text": 1}), "m")
    body = json.loads(factory.build(factory.plan()).body)
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


# -- error bodies ----------------------------------------------------------------------------------------


def test_error_message_from_any_body() -> None:
    assert error_message(b'{"error":{"message":"Already borrowed","type":"x"}}') == "Already borrowed"
    assert error_message(b'{"detail":"Not Found"}') == "Not Found"
    assert error_message(b'{"message":"boom"}') == "boom"
    assert error_message(b"<html><body><h1>502 Bad Gateway</h1></body></html>") == "502 Bad Gateway"
    assert error_message(b"\xff\xfe garbage").startswith("\ufffd")
    assert error_message(b"") == "(empty body)"


def test_api_key_never_in_messages() -> None:
    client = ChatClient("http://127.0.0.1:1", concurrency=1, timeout=1, api_key="sk-secret-123")
    assert "sk-secret-123" not in client._clean("401: bad key sk-secret-123 for Authorization")
