"""The asyncio client against a real loopback server (a subprocess) that misbehaves on purpose."""

from __future__ import annotations

import asyncio
import json

import pytest

from borrowguard.load.client import ChatClient, Outcome
from borrowguard.load.metrics import LoadMetrics
from borrowguard.load.runner import LoadPlan, LoadRun
from borrowguard.load.scenarios import RequestFactory, ScenarioSettings
from support.fakeserver import FakeServer

pytestmark = pytest.mark.slow  # every test here talks to a real server subprocess

# The fake server generates (chat and completions); it has no /tokenize.
GENERATION_MIX = {"text": 1.0, "image": 1.0, "tools": 1.0}


def _send_all(url: str, n: int, *, stream: bool, timeout: float = 5.0) -> list[tuple[bytes, Outcome]]:
    async def go() -> list[tuple[bytes, Outcome]]:
        factory = RequestFactory(ScenarioSettings(mix=GENERATION_MIX, stream=stream, image_sizes=((64, 64),)), "fake-model")
        async with ChatClient(url, concurrency=4, timeout=timeout) as client:
            built = [factory.build(factory.plan()) for _ in range(n)]
            outcomes = await asyncio.gather(*(client.send(b) for b in built))
        return [(b.body, o) for b, o in zip(built, outcomes)]

    return asyncio.run(go())


@pytest.mark.parametrize("stream", [False, True])
def test_healthy_server_every_request_ok(stream: bool) -> None:
    with FakeServer(faults=["ok"]) as srv:
        results = _send_all(srv.url, 24, stream=stream)
    for body, out in results:
        assert out.ok, out
        assert out.prompt_tokens == len(body) // 4  # the fake counts the body: a real, per-request number
        assert out.completion_tokens == 4
        assert (out.ttft is not None) is stream
        assert 0 < out.latency < 5


@pytest.mark.parametrize(
    ("fault", "label", "message"),
    [
        ("garbage-sse", "bad-sse", "not JSON"),
        ("cut-sse", "stream-cut", ""),
        ("huge-line", "bad-sse", "exceeded"),
        ("reset", "reset", ""),
        ("stall", "timeout", "no complete answer"),
        ("html-500", "500", "Internal Server Error"),
        ("json-500", "500", "RuntimeError: Already borrowed"),
    ],
)
def test_every_fault_is_recorded_never_raised(fault: str, label: str, message: str) -> None:
    with FakeServer(faults=[fault, "ok"]) as srv:
        results = _send_all(srv.url, 6, stream=True, timeout=1.5)
    labels = sorted(out.label for _, out in results)
    assert labels.count("200") == 3, labels
    bad = [out for _, out in results if not out.ok]
    assert len(bad) == 3
    for out in bad:
        assert out.label == label, (out.label, out.message)
        assert message in (out.message or "")


def test_refused_connection_is_an_outcome() -> None:
    with FakeServer() as srv:
        url = srv.url
    ((_, out),) = _send_all(url, 1, stream=False)  # the server is gone: nothing listens on that port
    assert out.label == "refused" and not out.ok


def test_load_run_holds_concurrency_and_writes_records(tmp_path) -> None:
    records = tmp_path / "records.jsonl"

    async def go(url: str) -> tuple[LoadMetrics, LoadRun]:
        factory = RequestFactory(ScenarioSettings(mix=GENERATION_MIX, image_sizes=((64, 64),)), "fake-model")
        metrics = LoadMetrics(factory.scenarios)
        with records.open("w") as fh:
            async with ChatClient(url, concurrency=8, timeout=5) as client:
                made = client.t0
                await asyncio.sleep(0.2)  # the level starts later than its client was made
                run = LoadRun(
                    client, factory, metrics, LoadPlan(concurrency=8, duration=None, requests=300), fh
                )
                await run.run()
                assert client.t0 == made  # the run's clock is its own, handed to send, not written into the client
        return metrics, run

    with FakeServer(faults=["ok"]) as srv:
        metrics, run = asyncio.run(go(srv.url))
    lines = [json.loads(line) for line in records.read_text().splitlines()]
    assert len(lines) == metrics.requests == metrics.ok == 300
    assert all(0 <= line["start"] < run.elapsed() for line in lines)  # seconds since the level started
    assert {line["scenario"] for line in lines} == {"text", "image", "tools"}
    assert {line["concurrency"] for line in lines} == {8}  # the level's, from its plan
    assert max(b.inflight_max for b in metrics.series.buckets) == 8
    assert metrics.inflight == 0 and run.cancelled_in_flight == 0
    assert all(r.summary().consistent for r in metrics.repeats.values()) and len(metrics.repeats) == 5


def _send_with_key(url: str, key: str, n: int) -> list[Outcome]:
    async def go() -> list[Outcome]:
        factory = RequestFactory(ScenarioSettings(mix={"text": 1.0}), "fake-model")
        async with ChatClient(url, concurrency=2, timeout=30, api_key=key) as client:
            return list(await asyncio.gather(*(client.send(factory.build(factory.plan())) for _ in range(n))))

    return asyncio.run(go())


def test_a_key_echoed_where_the_message_is_cut_is_masked_before_the_cut() -> None:
    key = "k3y-0123456789abcdefghijklmnopqrstuvwxyz"
    with FakeServer(faults=["long-echo"], api_key=key) as srv:
        outcomes = _send_with_key(srv.url, key, 2)
    for out in outcomes:
        assert out.status == 400 and out.message is not None, out
        assert len(out.message) <= 300
        # Not the key, and not the part of it that a cut-then-mask used to leave behind.
        assert all(key[i:i + 6] not in out.message for i in range(len(key) - 5)), out.message
        assert out.message.startswith("x" * 290 + "***"), out.message


def test_a_redirect_to_another_origin_is_not_followed_and_is_said() -> None:
    with FakeServer(faults=["ok"]) as elsewhere, FakeServer(faults=["ok"], redirect_to=elsewhere.url) as srv:
        outcomes = _send_all(srv.url, 6, stream=False)
        import urllib.request

        with urllib.request.urlopen(elsewhere.url + "/metrics", timeout=30) as response:
            reached = response.read().decode()
    assert "fake_requests_total 0" in reached, reached  # no prompt went to the other origin
    for _, out in outcomes:
        assert not out.ok and out.status == 307, out
        assert f"a redirect to {elsewhere.url}/v1/chat/completions: not followed" in (out.message or ""), out
