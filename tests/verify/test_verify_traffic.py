"""No request leaves the target, and what a hung target did is said: a redirect to another origin is never
followed (the server's answer is reported), and a preflight that timed out says what and after how long."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

import pytest

from support.fakeserver import FakeServer
from support.hanging import HangingServer

VERIFY = [sys.executable, "-m", "borrowguard", "verify", "--image-sizes", "64x64", "-c", "2", "--json"]


def _verify(*args: str, timeout: float = 300) -> tuple[subprocess.CompletedProcess[str], dict]:
    proc = subprocess.run([*VERIFY, *args], capture_output=True, text=True, timeout=timeout)
    assert proc.stdout, proc.stderr[-2000:]
    return proc, json.loads(proc.stdout)


def _chats(url: str) -> int:
    with urllib.request.urlopen(url + "/metrics", timeout=30) as response:
        line = next(ln for ln in response.read().decode().splitlines() if ln.startswith("fake_requests_total"))
    return int(float(line.split()[1]))


@pytest.mark.slow
def test_a_redirect_to_another_origin_is_not_followed_and_the_run_is_not_a_pass() -> None:
    with FakeServer(faults=["ok"]) as elsewhere, FakeServer(faults=["ok"], redirect_to=elsewhere.url) as srv:
        proc, doc = _verify("--url", srv.url, "-d", "3s")
        reached = _chats(elsewhere.url)
    assert reached == 0, f"{reached} requests went to the other origin"
    assert doc["verdict"] != "PASS" and proc.returncode != 0, doc["reasons"]
    said = " ".join(r["message"] for r in doc["reasons"])
    assert f"the server answered 307, a redirect to {elsewhere.url}/v1/models: not followed" in said, said


@pytest.mark.slow
def test_a_hung_target_says_what_timed_out_and_after_how_long() -> None:
    with HangingServer() as hung:
        proc, doc = _verify("--url", hung.url, "-d", "3s", "--timeout", "2s")
    assert doc["verdict"] == "ERROR" and proc.returncode == 2
    (reason,) = [r["message"] for r in doc["reasons"]]
    assert reason == f"cannot reach {hung.url}: GET /v1/models got no answer within 2 s (--timeout)", reason


@pytest.mark.slow
def test_a_hung_health_endpoint_says_it_timed_out_and_after_how_long() -> None:
    import asyncio

    import aiohttp

    from borrowguard.verify.watch import HealthWatch

    async def poll(url: str) -> str | None:
        watch = HealthWatch(url + "/health", timeout=0.5)
        async with aiohttp.ClientSession() as session:
            await watch.poll(session)
        return watch.last_error

    with HangingServer() as hung:
        assert asyncio.run(poll(hung.url)) == "no answer within 0.5 s"
