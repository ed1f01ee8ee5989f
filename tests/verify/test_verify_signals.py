"""Signals end a verify run at once: during the preflight of a hung server, during the drain of a stalling
one, and for a fleet with one hung target; the second signal exits now. Hang bounds only, never speed."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from borrowguard.verify.signals import install_interrupts
from support.fakeserver import FakeServer
from support.hanging import HangingServer

VERIFY = [sys.executable, "-m", "borrowguard", "verify", "--image-sizes", "64x64", "-c", "2", "--json"]
LONG = ["--timeout", "600s", "-d", "600s"]  # what a signal must not wait for
HANG_BOUND = 120.0  # seconds: far below LONG, far above any busy machine's exit


@contextlib.contextmanager
def _verify(*args: str) -> Iterator[subprocess.Popen[str]]:
    """verify running in a subprocess, killed on the way out if the test left it running."""
    # A background shell would start us with SIGINT ignored: give the child the default disposition.
    proc = subprocess.Popen([*VERIFY, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _wait_for_load(url: str, at_least: int = 10) -> None:
    deadline = time.monotonic() + HANG_BOUND
    while _metric(url, "fake_requests_total") < at_least and time.monotonic() < deadline:  # load flowing (stalls in flight, if any)
        time.sleep(0.2)


def _ended(proc: subprocess.Popen[str]) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=HANG_BOUND)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(f"still running {HANG_BOUND:g} s after the signal:\n{err[-2000:]}") from None


def _metric(url: str, name: str) -> int:
    import urllib.request

    with urllib.request.urlopen(url + "/metrics", timeout=30) as response:
        line = next(ln for ln in response.read().decode().splitlines() if ln.startswith(name + " "))
    return int(float(line.split()[1]))


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_cancels_the_preflight_of_a_hung_server(sig: signal.Signals) -> None:
    with HangingServer() as srv, _verify("--url", srv.url, *LONG) as proc:
        assert srv.accepted.wait(HANG_BOUND), "verify never connected"
        time.sleep(0.5)  # inside the preflight's request by now; no timing is asserted
        proc.send_signal(sig)
        out, err = _ended(proc)
    assert proc.returncode == 2, err[-2000:]
    doc = json.loads(out)
    assert doc["verdict"] == "INCOMPLETE" and doc["interrupted"] is True, doc["reasons"]
    assert any("interrupted during the preflight" in n for n in doc["notes"]), doc["notes"]


@pytest.mark.slow
def test_a_signal_does_not_wait_for_the_drain_of_a_stalling_server(tmp_path: Path) -> None:
    records = tmp_path / "r.jsonl"
    # Twenty answers, then a stall: the preflight's probes and the serial reference are answered (a stall
    # there holds a request to its timeout), then the load's workers stall in turn. Two stalls at once can only
    # be the load's (what comes before asks one request at a time): the signal then comes while the run would
    # have to drain them.
    with FakeServer(faults=[*["ok"] * 20, "stall"]) as srv, _verify("--url", srv.url, *LONG, "--report",
                                                                  str(tmp_path / "r.html"), "--records",
                                                                  str(records)) as proc:
        deadline = time.monotonic() + HANG_BOUND
        while _metric(srv.url, "fake_stalled") < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _metric(srv.url, "fake_stalled") >= 2, "the load's workers never stalled"
        proc.send_signal(signal.SIGINT)
        out, err = _ended(proc)
    assert proc.returncode == 2, err[-2000:]
    doc = json.loads(out)
    assert doc["interrupted"] is True and doc["levels"][0]["summary"]["requests"] > 0
    assert (tmp_path / "r.html").stat().st_size > 0  # the report is not lost


@pytest.mark.slow
def test_a_fleet_with_a_hung_target_ends_on_sigterm() -> None:
    with FakeServer(faults=["ok"]) as ok, HangingServer() as hung, \
            _verify("--target", f"ok={ok.url}", "--target", f"hung={hung.url}", *LONG) as proc:
        assert hung.accepted.wait(HANG_BOUND)
        _wait_for_load(ok.url)
        proc.send_signal(signal.SIGTERM)
        out, _ = _ended(proc)
    doc = json.loads(out)
    assert doc["interrupted"] is True, doc
    assert {t["name"] for t in doc["targets"]} == {"ok", "hung"}


def test_the_second_signal_exits_now() -> None:
    calls: list[str] = []

    async def run() -> None:
        restore = install_interrupts(lambda: calls.append("interrupt"))
        try:
            os.kill(os.getpid(), signal.SIGINT)
            await asyncio.sleep(0.5)  # the first is handled: the run goes on to end itself
            os.kill(os.getpid(), signal.SIGINT)
            await asyncio.sleep(60)  # never reached: the second one raises out of the loop
        finally:
            restore()

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(run())
    assert calls == ["interrupt"]
