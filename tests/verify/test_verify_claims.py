"""A verdict claims only what it tested, proven against real HTTP servers on 127.0.0.1.

- a server that serves none of the tokenizing endpoints (Python's own http.server: 501 to every POST) gets
  INCOMPLETE (exit 2) saying what it serves — never PASS;
- a log check the user asked for (--log-cmd) that could not run turns what would be a PASS into INCOMPLETE;
- a PASS names what it exercised.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import pytest

from support.fakeserver import FakeServer
from support.http import request

SMALL = ["--image-sizes", "64x64", "--mix", "text=1,image=1,tools=1"]


def _cli(*args: str) -> tuple[int, dict]:
    proc = subprocess.run([sys.executable, "-m", "borrowguard", "verify", *args, "--json"], capture_output=True,
                          text=True, timeout=180)
    assert proc.stdout, proc.stderr[-2000:]
    return proc.returncode, json.loads(proc.stdout)


@pytest.mark.slow
def test_a_server_that_serves_nothing_is_incomplete_never_pass(tmp_path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)],
                              cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                request(url, "GET", "/", timeout=2)
                break
            except OSError:
                time.sleep(0.2)
        code, doc = _cli("--url", url, "--model", "m", "-d", "2s", "-c", "2")  # default mix
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert (code, doc["verdict"]) == (2, "INCOMPLETE"), (doc["reasons"], doc["notes"])
    assert not any(doc["target"]["endpoints"].values()), doc["target"]["endpoints"]
    assert any("serves none of the tokenizing endpoints" in n and "/v1/embeddings" in n for n in doc["notes"])
    assert doc["levels"] == []


@pytest.mark.slow
def test_an_asked_for_log_check_that_could_not_run_is_not_a_pass() -> None:
    with FakeServer(faults=["ok"]) as srv:
        code, doc = _cli("--url", srv.url, "-d", "2s", "-c", "2", *SMALL,
                         "--log-cmd", "sh -c 'echo No such container >&2; exit 1'")
        assert (code, doc["verdict"]) == (2, "INCOMPLETE"), (doc["reasons"], doc["checks"])
        assert any("--log-cmd" in n and "could not run" in n for n in doc["notes"]), doc["notes"]
        code, doc = _cli("--url", srv.url, "-d", "2s", "-c", "2", *SMALL)  # no log asked for: PASS
    assert (code, doc["verdict"]) == (0, "PASS"), doc["reasons"]
    assert any(n.startswith("exercised under concurrent load: ") and "text (" in n for n in doc["notes"])
