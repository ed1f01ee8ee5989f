"""Unit tests of the load pieces that need no server: parsing, SSE, histograms, scenarios, metrics."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from borrowguard.cli._params import Duration, ImageSizes, Levels, Mix
from borrowguard.errors import UserInputError
from borrowguard.load.client import ChatClient, Outcome, error_message
from borrowguard.load.faults import Fault
from borrowguard.load.metrics import LoadMetrics, LogHistogram, TimeSeries
from borrowguard.load.scenarios import TOOLS, RequestFactory, ScenarioSettings
from borrowguard.load.sse import ServerSentEvent, SSEError, SSEParser
from borrowguard.verify.document import to_dict
from borrowguard.verify.watch import parse_metrics

# -- options ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("5m", 300), ("1h", 3600), ("250ms", 0.25), ("12", 12), (" 2.5 S ", 2.5)],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert Duration().convert(text, None, None) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "abc", "-5s", "0s", "5 minutes", "1d"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(UserInputError, match="--duration: "):
        Duration().parse(text, "--duration")


def test_parse_duration_zero_allowed_for_ramp_up() -> None:
    assert Duration(allow_zero=True).convert("0s", None, None) == 0


def test_parse_lists() -> None:
    assert ImageSizes().convert("256x256, 720X1280", None, None) == ((256, 256), (720, 1280))
    assert Mix().convert("text=2,image=0,tools", None, None) == {"text": 2.0, "tools": 1.0}
    assert Levels().convert("8,16,32", None, None) == [8, 16, 32]
    for kind, bad in [(ImageSizes, ("256", "8x8", "100000x10", "")), (Mix, ("audio=1", "text=x", "text=0", "text=-1")),
                      (Levels, ("0", "8,a", ""))]:
        for text in bad:
            with pytest.raises(UserInputError, match="--opt: "):
                kind().parse(text, "--opt")


# -- SSE -------------------------------------------------------------------------------------------------

STREAM = (
    b"\xef\xbb\xbf: ping\r\n\r\n"  # a BOM, then a comment
    b'data: {"choices":[{"delta":{"content":"h\xc3\xa9"}}]}\r\n\r\n'
    b"event: message\nid: 7\n"
    b'data:{"usage":{"prompt_tokens":5}}\n\n'
    b"data: first\rdata:  second\r\rretry: 1500\n"  # CR line ends; one space dropped, not two
    b"data\n\n"  # a field without a colon: an empty data line
    b"data: [DONE]\n\n"
    b"data: never ended"  # no blank line before the end of the stream: discarded
)
EXPECTED = [
    ServerSentEvent('{"choices":[{"delta":{"content":"h\u00e9"}}]}'),
    ServerSentEvent('{"usage":{"prompt_tokens":5}}', "message", "7"),
    ServerSentEvent("first\n second", "message", "7"),
    ServerSentEvent("", "message", "7"),
    ServerSentEvent("[DONE]", "message", "7"),
]


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, len(STREAM)])
def test_sse_parser_any_split(chunk: int) -> None:
    parser = SSEParser()
    got: list[ServerSentEvent] = []
    for i in range(0, len(STREAM), chunk):
        got += parser.feed(STREAM[i : i + chunk])
    assert got == EXPECTED
    assert parser.retry == 1500 and parser.last_event_id == "7"
    assert parser.close() is True  # the unfinished event was dropped, and said so


def test_sse_data_lines_of_one_event_join_with_newlines() -> None:
    # The WHATWG rule the old parser broke: one event, three data lines, one payload.
    parser = SSEParser()
    events = parser.feed(b'data: {"a":\ndata: 1}\ndata:\n\n')
    assert events == [ServerSentEvent('{"a":\n1}\n')]
    assert parser.close() is False


@pytest.mark.parametrize(
    ("stream", "expected"),
    [
        (b"event: delta\ndata: x\n\n", [ServerSentEvent("x", "delta")]),
        (b"event: ping\n\ndata: y\n\n", [ServerSentEvent("y")]),  # no data: nothing, type reset
        (b"id: 1\x002\nid: 3\ndata: z\n\n", [ServerSentEvent("z", "message", "3")]),  # NUL: ignored
        (b"retry: 12x\nfoo: bar\ndata:z\n\n", [ServerSentEvent("z")]),  # bad retry, unknown field
        (b"\xef\xbb\xbf\xef\xbb\xbfdata: b\n\n", []),  # only one BOM is dropped: the next is in a name
        (b"data: \xff\n\n", [ServerSentEvent("\ufffd")]),
        (b"data: a\r\n\r\ndata: b\n\rdata: c\r\n\n", [ServerSentEvent(x) for x in "abc"]),
    ],
)
def test_sse_fields_per_the_spec(stream: bytes, expected: list[ServerSentEvent]) -> None:
    for chunk in (1, len(stream)):
        parser = SSEParser()
        got = [e for i in range(0, len(stream), chunk) for e in parser.feed(stream[i : i + chunk])]
        assert got == expected


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([b"data", b":", b" ", b"x", b"\xc3\xa9", b"\r", b"\n", b"\r\n", b"id: 1",
                                 b"event", b"\xef\xbb\xbf"]), max_size=40),
       st.lists(st.integers(1, 8), min_size=1, max_size=10))
def test_sse_chunking_never_changes_the_events(pieces: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(pieces)
    whole = SSEParser()
    expected = whole.feed(stream)
    parser, got, i, k = SSEParser(), [], 0, 0
    while i < len(stream):
        got += parser.feed(stream[i : i + cuts[k % len(cuts)]])
        i, k = i + cuts[k % len(cuts)], k + 1
    assert got == expected
    assert parser.close() == whole.close()


def test_sse_parser_bounds_a_line_without_end() -> None:
    parser = SSEParser(max_event=1000)
    parser.feed(b"data: " + b"x" * 900)
    with pytest.raises(SSEError, match="exceeded"):
        parser.feed(b"x" * 200)


def test_sse_parser_bounds_an_event_without_end() -> None:
    # Short lines, but no blank line ever: the event's data must not grow without limit.
    parser = SSEParser(max_event=1000)
    with pytest.raises(SSEError, match="exceeded"):
        for _ in range(200):
            parser.feed(b"data: 0123456789\n")
    # Comments and events that end are not held: they never reach the limit.
    parser = SSEParser(max_event=1000)
    for _ in range(500):
        assert parser.feed(b": keep-alive\ndata: 0123456789\n\n") == [ServerSentEvent("0123456789")]


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
    m = LoadMetrics(["text", "image"])
    for tokens in (120, 120, 120, 97):
        m.started(0.1)
        m.finished(_outcome(repeat_key="text/plain", prompt_tokens=tokens, completion_tokens=4))
    m.started(0.1)
    m.finished(_outcome("image", repeat_key="image/plain", prompt_tokens=50))
    for i in range(50):
        m.started(0.2)
        m.finished(_outcome("image", status=500, message=f"RuntimeError: Already borrowed #{i % 5}"))
    s = m.summary(elapsed=2.0)
    assert s.requests == 55 and s.ok == 5 and s.errors == 50 and m.inflight == 0
    assert s.repeats["text/plain"].consistent is False
    assert s.repeats["text/plain"].prompt_tokens == {97: 1, 120: 3}
    assert s.repeats["image/plain"].consistent is True
    (group,) = s.error_groups
    assert group.status == "500" and group.scenario == "image" and group.count == 50
    assert group.fault is Fault.SERVER and group.mismatch is None
    assert len(group.messages) == 3  # bounded sample of distinct messages
    assert s.scenarios["image"].statuses == {"200": 1, "500": 50}
    doc = to_dict(s)  # the JSON form keeps the document's keys and spellings
    assert doc["repeats"]["text/plain"]["prompt_tokens"] == {"97": 1, "120": 3}
    assert doc["errors_by_status"][0]["fault"] == "server" and doc["errors"] == 50


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
    assert set(by_key) == {"text/plain", "text/trunc", "image/plain", "tools/plain", "tools/trunc", "tokenize/plain"}
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


# -- /metrics of the target ------------------------------------------------------------------------------

VLLM_METRICS = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="Qwen/Qwen2.5-VL-3B-Instruct",engine="0"} 2.0
# TYPE vllm:request_success_total counter
vllm:request_success_total{finished_reason="stop",model_name="m"} 12.0
vllm:request_success_created{finished_reason="stop",model_name="m"} 1.7e+09
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{le="0.3",model_name="m"} 1.0
vllm:e2e_request_latency_seconds_count{model_name="m"} 12.0
vllm:num_requests_waiting{model_name="a\\"b"} NaN
process_cpu_seconds_total 5.0
vllm:num_preemptions_total{model_name="m"} 0 1700000000000
"""


def test_parse_metrics_keeps_request_series_in_the_page_order() -> None:
    assert parse_metrics(VLLM_METRICS) == {
        'vllm:num_requests_running{model_name="Qwen/Qwen2.5-VL-3B-Instruct",engine="0"}': 2.0,
        'vllm:request_success_total{finished_reason="stop",model_name="m"}': 12.0,
        'vllm:e2e_request_latency_seconds_count{model_name="m"}': 12.0,
        'vllm:num_preemptions_total{model_name="m"}': 0.0,
    }  # no buckets, no _created, nothing unrelated, and no NaN (the JSON report allows none)


def test_parse_metrics_survives_bad_lines_and_bounds_the_series() -> None:
    page = VLLM_METRICS + "vllm:request_broken{ 1\n" + "".join(f"x_requests_{i} {i}\n" for i in range(100))
    got = parse_metrics(page)
    assert got['vllm:request_success_total{finished_reason="stop",model_name="m"}'] == 12.0
    assert len(got) == 40 and "x_requests_0" in got  # one bad line costs only itself
    assert parse_metrics("<html>not metrics</html>") == {}


def test_parse_metrics_reads_the_bundled_servers_page() -> None:
    from borrowguard.server.metrics import Metrics as ServerMetrics

    server = ServerMetrics(guard=True)
    server.requests[("POST", "/v1/chat/completions", 200)] += 5
    server.record_tokenizer_error(RuntimeError("Already borrowed"))
    got = parse_metrics(server.render())
    assert got['borrowguard_requests_total{endpoint="/v1/chat/completions",method="POST",status="200"}'] == 5
    assert got['borrowguard_tokenizer_errors_total{kind="already_borrowed"}'] == 1
    assert got["borrowguard_requests_in_flight"] == 0


def test_a_reset_tied_to_an_error_answer_is_counted_and_returned_with_its_fault() -> None:
    m = LoadMetrics(["text"])
    m.started(0.1)
    m.finished(_outcome(status=400, message="too long", fault=Fault.WORKLOAD))
    reset = _outcome(status=None, error="reset", message="ServerDisconnectedError")
    m.started(0.2)
    counted = m.finished(reset)
    assert counted.fault is Fault.WORKLOAD and reset.fault is None  # the caller's outcome is left as it was
    assert m.summary(1.0).tied_resets == 1
