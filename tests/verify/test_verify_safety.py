"""`borrowguard verify` never reports "clean" on what it did not read, never loses a finished run, never
leaves its bundled server behind, and never leaks the API key or a server's escape sequences."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.fakeserver import FakeServer

SMALL = ["--image-sizes", "64x64", "--mix", "text=1,image=1,tools=1"]
NO_TRACEBACK = "Traceback"


def _cli(*args: str, timeout: float = 120, env: dict | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "borrowguard", "verify", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


@pytest.mark.slow
def test_a_failing_log_command_is_reported_and_pass_does_not_claim_the_log(tmp_path: Path) -> None:
    with FakeServer(faults=["ok"]) as srv:
        proc = _cli("--url", srv.url, "-d", "2s", "-c", "2", *SMALL, "--json",
                    "--log-cmd", "sh -c 'echo No such container >&2; exit 1'")
    doc = json.loads(proc.stdout)
    log_check = next(c for c in doc["checks"] if c["name"] == "log")
    assert log_check["state"] == "not-run", doc["checks"]
    (source,) = doc["log"]["sources"]
    assert "exit code 1" in source["error"]
    proc = _cli("--url", "http://127.0.0.1:9", "--log-cmd", " ", "-d", "1s")
    assert proc.returncode == 2 and "--log-cmd" in proc.stderr and NO_TRACEBACK not in proc.stderr


@pytest.mark.slow
def test_pass_without_a_log_says_the_log_was_not_checked() -> None:
    with FakeServer(faults=["ok"]) as srv:
        proc = _cli("--url", srv.url, "-d", "2s", "-c", "2", *SMALL)
    assert proc.returncode == 0, proc.stderr
    assert "no tokenizer errors" not in proc.stdout
    assert "not checked: log" in proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("option", ["--report", "--records"])
def test_a_bad_output_path_is_refused_before_any_load(tmp_path: Path, option: str) -> None:
    with FakeServer(faults=["ok"]) as srv:
        proc = _cli("--url", srv.url, "-d", "10m", option, str(tmp_path / "missing" / "out"))
    assert proc.returncode == 2 and "does not exist" in proc.stderr and NO_TRACEBACK not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_report_writes_through_a_symlink_and_refuses_a_device(tmp_path: Path) -> None:
    real = tmp_path / "real.html"
    real.write_text("old")
    link = tmp_path / "link.html"
    link.symlink_to(real)
    with FakeServer(faults=["ok"]) as srv:
        ok = _cli("--url", srv.url, "-d", "1s", "-c", "2", *SMALL, "--report", str(link))
        device = _cli("--url", srv.url, "-d", "1s", "--report", "/dev/null")
    assert ok.returncode == 0, ok.stderr
    assert link.is_symlink() and "<html" in real.read_text()
    assert device.returncode == 2 and "not a regular file" in device.stderr
    assert Path("/dev/null").is_char_device()


@pytest.mark.slow
def test_api_key_and_escape_sequences_never_reach_the_output(tmp_path: Path) -> None:
    key = "sk-not-shaped-like-a-key-0123"  # a literal value, not an sk-/Bearer pattern to guess at
    log = tmp_path / "server.log"
    log.touch()
    env = {**os.environ, "MY_KEY": key}
    with FakeServer(faults=["ok", "hostile-400"], api_key=key, log_path=log) as srv:
        as_json = _cli("--url", srv.url, "-d", "2s", "-c", "2", *SMALL, "--api-key-env", "MY_KEY", "--log",
                       str(log), "--json", "--report", str(tmp_path / "r.html"), env=env)
        terminal = _cli("--url", srv.url, "-d", "2s", "-c", "2", *SMALL, "--api-key-env", "MY_KEY", env=env)
    assert key in log.read_text()  # the server did log it
    for text in (as_json.stdout, as_json.stderr, (tmp_path / "r.html").read_text(), terminal.stdout,
                 terminal.stderr):
        assert key not in text
    assert "\x1b]0;" not in terminal.stdout and "\x1b[2J" not in terminal.stdout
    assert "bad request (key ***) red" in terminal.stdout  # the words stay; the escapes (and the title) go


@pytest.mark.slow
def test_a_hanging_server_cannot_stretch_a_short_run(tmp_path: Path) -> None:
    # The preflight's probes and the serial reference are answered (each stall there would be held to the
    # probe timeout instead), then the load's requests stall: what is left is the drain.
    with FakeServer(faults=[*["ok"] * 20, "stall"]) as srv:
        started = time.monotonic()
        proc = _cli("--url", srv.url, "-d", "3s", "-c", "2", *SMALL, "--json", "--timeout", "600s", timeout=400)
        took = time.monotonic() - started
    assert json.loads(proc.stdout)["verdict"] == "FAIL"
    assert took < 300, took  # a hang bound, generous: before the drain was bounded it waited --timeout


def _listening(url: str) -> bool:
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex((host, int(port))) == 0


def _start_bundled(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[str], Path]:
    log = tmp_path / "server.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "borrowguard", "verify", "-d", "10m", "-c", "2", *SMALL, "--server-log", str(log),
         *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and "Ready: GET /health" not in (log.read_text() if log.exists() else ""):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    time.sleep(2)  # the load is running
    return proc, log


def _server_url(log: Path) -> str:
    port = log.read_text().split("Ready: GET /health answered 200 on port ", 1)[1].split()[0]
    return f"http://127.0.0.1:{port}"


@pytest.mark.slow
def test_sigterm_ends_the_run_like_ctrl_c_and_stops_the_bundled_server(tmp_path: Path) -> None:
    proc, log = _start_bundled(tmp_path, "--json", "--report", str(tmp_path / "r.html"))
    url = _server_url(log)
    assert _listening(url)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, err
    doc = json.loads(out)
    assert doc["verdict"] == "INCOMPLETE" and doc["interrupted"] is True
    assert (tmp_path / "r.html").exists()
    assert not _listening(url)


@pytest.mark.slow
def test_the_bundled_server_does_not_outlive_a_killed_verify(tmp_path: Path) -> None:
    proc, log = _start_bundled(tmp_path)
    url = _server_url(log)
    proc.kill()  # SIGKILL: verify cannot clean up; the server must notice by itself
    proc.wait(timeout=30)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and _listening(url):
        time.sleep(0.2)
    assert not _listening(url)
    assert "the process that started it is gone" in log.read_text()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "needle"),
    [(["--mix", "text=inf"], "--mix"), (["--mix", "text=nan"], "--mix"), (["--duration", "0s"], "--duration")],
)
def test_bad_values_are_one_line(args: list[str], needle: str) -> None:
    proc = _cli("--url", "http://127.0.0.1:9", *args)
    assert proc.returncode == 2 and needle in proc.stderr and NO_TRACEBACK not in proc.stderr


@pytest.mark.slow
def test_a_missing_extra_names_the_extra_to_install() -> None:
    code = "import sys; sys.modules['aiohttp'] = None; from borrowguard.cli import main; main(['verify', '-n', '1'])"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "pip install 'borrowguard[load]'" in proc.stderr
    assert NO_TRACEBACK not in proc.stderr


@pytest.mark.slow
def test_a_closed_pipe_is_a_quiet_exit_141(tmp_path: Path) -> None:
    log = tmp_path / "big.log"
    log.write_text("RuntimeError: Already borrowed\n" * 20000)
    # Live output (one line per hit, megabytes of it) outruns the pipe's buffer: the writer meets EPIPE.
    code = (
        f"{sys.executable} -m borrowguard scan --follow {log} --for 30 | head -c 10 >/dev/null; "
        "echo ${PIPESTATUS[0]}"
    )
    proc = subprocess.run(["bash", "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "141", proc.stderr
    assert NO_TRACEBACK not in proc.stderr and "BrokenPipe" not in proc.stderr
