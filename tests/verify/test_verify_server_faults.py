"""`borrowguard verify` against misbehaving real servers: each failure is a verdict, never a crash or hang."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from borrowguard.load.scenarios import ScenarioSettings
from borrowguard.verify import VerifyConfig, run_verify
from support.fakeserver import FakeServer

pytestmark = pytest.mark.slow  # every test here talks to a real server subprocess

SMALL = ScenarioSettings(image_sizes=((64, 64),))


def _config(url: str, **kw) -> VerifyConfig:
    base = {"url": url, "scenario": SMALL, "concurrency": 4, "duration": 3.0, "timeout": 2.0}
    base.update(kw)
    return VerifyConfig(**base)


def _cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "borrowguard", "verify", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_healthy_server_passes_and_json_is_complete(tmp_path: Path) -> None:
    with FakeServer(faults=["ok"]) as srv:
        proc = _cli(
            "--url",
            srv.url + "/v1/",
            "-d",
            "2s",
            "-c",
            "4",
            "--image-sizes",
            "64x64",
            "--json",
            "--records",
            str(tmp_path / "r.jsonl"),
            "--report",
            str(tmp_path / "r.html"),
        )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["verdict"] == "PASS" and doc["reasons"] == []
    assert doc["target"]["url"] == srv.url and doc["target"]["model"] == "fake-model"
    (level,) = doc["levels"]
    assert level["summary"]["ok"] == level["summary"]["requests"] > 20
    assert all(s["ok"] > 0 for s in level["summary"]["scenarios"].values())
    assert doc["health"]["polls"] >= 2 and doc["health"]["failures"] == 0
    assert doc["metrics"]["after"]["fake_requests_total"] >= level["summary"]["requests"]
    records = (tmp_path / "r.jsonl").read_text().splitlines()
    assert len(records) == level["summary"]["requests"]
    assert (tmp_path / "r.html").read_text().count("<svg") == 4


def test_hostile_responses_fail_with_reasons_by_status_and_scenario() -> None:
    faults = ["ok", "garbage-sse", "ok", "cut-sse", "ok", "reset", "ok", "html-500", "ok", "stall", "ok"]
    with FakeServer(faults=faults) as srv:
        result = run_verify(
            _config(srv.url, scenario=ScenarioSettings(image_sizes=((64, 64),), stream=True), timeout=1.0)
        )
    assert result.verdict == "FAIL" and result.exit_code == 1
    (reason,) = [r for r in result.reasons if r.code == "request-errors"]
    summary = result.levels[0].summary
    labels = {g.status for g in summary.error_groups}
    assert {"bad-sse", "stream-cut", "500", "timeout"} <= labels
    # A reset on a reused keep-alive connection is sent again once (and then meets the next, healthy fault):
    # which resets land on a reused connection depends on timing, so every reset is seen one way or the other.
    assert "reset" in labels or summary.retried > 0, summary
    html_500 = [g for g in summary.error_groups if g.status == "500"]
    assert any("Internal Server Error" in m for g in html_500 for m in g.messages)
    assert "500 on" in reason.message
    assert not any(r.code == "engine-dead" for r in result.reasons)  # a rude server is not a dead one
    json.dumps(result.to_dict(), allow_nan=False)


def test_max_error_rate_tolerates_a_few_failures() -> None:
    faults = ["html-500"] + ["ok"] * 30
    with FakeServer(faults=faults) as srv:
        strict = run_verify(_config(srv.url, duration=2.0))
        lenient = run_verify(_config(srv.url, duration=2.0, max_error_rate=0.2))
    assert strict.verdict == "FAIL" and [r.code for r in strict.reasons] == ["request-errors"]
    assert lenient.verdict == "PASS", lenient.reasons


def test_identical_requests_with_different_prompt_tokens_fail() -> None:
    with FakeServer(faults=["leak"]) as srv:
        result = run_verify(_config(srv.url))
    codes = {r.code for r in result.reasons}
    assert codes == {"prompt-tokens-mismatch"}, result.reasons
    assert result.levels[0].summary.errors == 0


@pytest.mark.parametrize("how", ["file", "command"])
def test_tokenizer_signature_in_followed_log_fails(tmp_path: Path, how: str) -> None:
    log = tmp_path / "server.log"
    log.write_text("RuntimeError: Already borrowed\n")  # from before the run: must not count
    # The command reads from the file's second line on, not from its end as it starts (`tail -n 0`): on a busy
    # machine tail may start after the server wrote its first lines, and the count below is exact.
    follow = {"logs": [log]} if how == "file" else {"log_commands": [f"tail -n +2 -F {log}"]}
    with FakeServer(faults=["ok"] * 40 + ["borrowed-log"], log_path=log) as srv:
        result = run_verify(_config(srv.url, **follow))
    assert result.verdict == "FAIL"
    assert [r.code for r in result.reasons] == ["tokenizer-errors"]
    assert "tokenizer-already-borrowed" in result.reasons[0].message
    n_logged = log.read_text().count("RuntimeError: Already borrowed") - 1
    assert n_logged > 0 and result.finding_counts["tokenizer-already-borrowed"] == n_logged
    assert all(0 <= f.t <= 4 for f in result.findings)


def test_server_death_mid_run_fails_fast_with_partial_report(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.touch()
    duration = 3600.0
    with FakeServer(faults=["ok"], die_after=1.5, log_path=log) as srv:
        t0 = time.monotonic()
        result = run_verify(_config(srv.url, duration=duration, logs=[log]))
        took = time.monotonic() - t0
    # Stopping at the death, not at the end of an hour's run: a generous bound only a hang reaches.
    assert took < 300, f"verify hung for {took:.1f}s after the server died"
    assert result.verdict == "FAIL"
    death = [r for r in result.reasons if r.code == "engine-dead"]
    assert death, result.reasons
    summary = result.levels[0].summary
    assert summary.ok > 0 and summary.errors > 0  # partial: what happened before the death is there
    assert result.finding_counts.get("engine-dead", 0) >= 1 or "refused" in death[0].message


def test_sweep_reports_the_highest_passing_level_and_stops_at_a_failure() -> None:
    with FakeServer(faults=["ok"]) as srv:
        good = run_verify(_config(srv.url, duration=1.5, sweep=[2, 4, 6]))
    with FakeServer(faults=["leak"]) as srv:
        bad = run_verify(_config(srv.url, duration=1.5, sweep=[2, 4]))
    assert good.verdict == "PASS" and [lvl.concurrency for lvl in good.levels] == [2, 4, 6]
    assert good.highest_passing == 6
    assert all(
        max(p.inflight_max for p in lvl.series.points) == lvl.concurrency for lvl in good.levels
    )
    assert bad.verdict == "FAIL" and len(bad.levels) == 1 and bad.highest_passing is None
    assert all(r.level == 2 for r in bad.reasons)


def test_unreachable_url_is_could_not_run() -> None:
    with FakeServer() as srv:
        url = srv.url
    proc = _cli("--url", url, "-d", "2s", "--json")
    assert proc.returncode == 2
    doc = json.loads(proc.stdout)
    assert doc["verdict"] == "ERROR" and doc["reasons"][0]["code"] == "could-not-run"
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--duration", "soon"], "--duration"),
        (["--mix", "audio=1"], "--mix"),
        (["--url", "localhost:8000"], "--url"),
        (["--sweep", "8,x"], "--sweep"),
        (["--api-key-env", "BORROWGUARD_TEST_SURELY_UNSET"], "BORROWGUARD_TEST_SURELY_UNSET"),
        (["--log", "/nonexistent/server.log", "--url", "http://127.0.0.1:9"], "no such file"),
        (["--url", "http://127.0.0.1:9", "--server-guard", "off"], "--server-guard"),
    ],
)
def test_user_mistakes_are_one_line_and_exit_2(args: list[str], needle: str) -> None:
    proc = _cli(*args)
    assert proc.returncode == 2
    assert proc.stderr.startswith("borrowguard: error:") and needle in proc.stderr
    assert "Traceback" not in proc.stderr


def test_ctrl_c_gives_a_partial_report(tmp_path: Path) -> None:
    report = tmp_path / "partial.html"
    with FakeServer(faults=["ok"]) as srv:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "borrowguard",
                "verify",
                "--url",
                srv.url,
                "-d",
                "60s",
                "-c",
                "4",
                "--image-sizes",
                "64x64",
                "--json",
                "--report",
                str(report),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # wait until load is flowing, seen by the fake's own counter
            time.sleep(0.5)
            if "fake_requests_total" in _get(srv.url + "/metrics") and _count(srv.url) > 20:
                break
        proc.send_signal(signal.SIGINT)
        # A hang bound, not a speed check: the run asked for 60 s, so ending (interrupted, below) is the proof.
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, err
    doc = json.loads(out)
    assert doc["verdict"] == "INCOMPLETE" and doc["interrupted"] is True
    assert doc["levels"][0]["summary"]["requests"] > 0
    assert report.read_text().count("<svg") == 4


@pytest.mark.parametrize("right_key", [True, False])
def test_api_key_is_sent_and_never_written(tmp_path: Path, right_key: bool) -> None:
    secret = "sk-test-" + os.urandom(8).hex()
    env = dict(os.environ, BG_TEST_KEY=secret)
    with FakeServer(faults=["ok"], api_key=secret if right_key else "sk-the-other-one") as srv:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "borrowguard",
                "verify",
                "--url",
                srv.url,
                "-d",
                "2s",
                "-c",
                "2",
                "--model",
                "fake-model",
                "--mix",
                "text=1",
                "--api-key-env",
                "BG_TEST_KEY",
                "--json",
                "--records",
                str(tmp_path / "r.jsonl"),
                "--report",
                str(tmp_path / "r.html"),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
    doc = json.loads(proc.stdout)
    if right_key:
        assert proc.returncode == 0 and doc["verdict"] == "PASS", proc.stderr
    else:  # the server echoes the wrong key in its 401 message; it must not reach any output
        assert proc.returncode == 1 and doc["levels"][0]["summary"]["scenarios"]["text"][
            "statuses"
        ].keys() == {"401"}
        assert "invalid API key: Bearer ***" in json.dumps(doc)
    for text in (
        proc.stdout,
        proc.stderr,
        (tmp_path / "r.jsonl").read_text(),
        (tmp_path / "r.html").read_text(),
    ):
        assert secret not in text
    assert doc["config"]["api_key_env"] == "BG_TEST_KEY"


def _get(url: str) -> str:
    import urllib.request

    with urllib.request.urlopen(url, timeout=5) as resp:
        return resp.read().decode()


def _count(url: str) -> int:
    for line in _get(url + "/metrics").splitlines():
        if line.startswith("fake_requests_total "):
            return int(float(line.split()[1]))
    return 0
