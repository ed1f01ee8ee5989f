"""No secret leaves the process, and masking never touches our own words: a key echoed where a message is
cut, a key that is a word of the report (`PASS`, `token`), a password in --url, a key with a newline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.fakeserver import FakeServer

VERIFY = [sys.executable, "-m", "borrowguard", "verify", "--image-sizes", "64x64", "-c", "2"]


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*VERIFY, *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})


def _outputs(proc: subprocess.CompletedProcess[str], tmp_path: Path) -> dict[str, str]:
    files = {p.name: p.read_text() for p in tmp_path.iterdir() if p.suffix in (".html", ".jsonl", ".log")}
    return {"stdout": proc.stdout, "stderr": proc.stderr, **files}


@pytest.mark.slow
def test_a_key_echoed_at_the_cut_leaves_no_piece_in_any_output(tmp_path: Path) -> None:
    key = "k3y-0123456789abcdefghijklmnopqrstuv"  # 36 characters, no sk-/Bearer shape to guess at
    with FakeServer(faults=["ok", "long-echo"], api_key=key) as srv:
        proc = _run("--url", srv.url, "-d", "2s", "--api-key-env", "MY_KEY", "--json",
                    "--report", str(tmp_path / "r.html"), "--records", str(tmp_path / "r.jsonl"),
                    env={"MY_KEY": key})
    assert json.loads(proc.stdout)["verdict"] == "FAIL", proc.stderr[-2000:]  # the 400s were seen
    assert "x" * 200 in (tmp_path / "r.jsonl").read_text()  # the echo itself did reach the records
    pieces = [key[i:i + 8] for i in range(len(key) - 7)]
    for name, text in _outputs(proc, tmp_path).items():
        found = [p for p in pieces if p in text]
        assert not found, f"{name} holds part of the key: {found[:3]}"


@pytest.mark.slow
@pytest.mark.parametrize("key", ["PASS", "token"])
def test_a_key_that_is_one_of_our_words_does_not_mangle_the_report(key: str, tmp_path: Path) -> None:
    with FakeServer(faults=["ok"], api_key=key) as srv:
        proc = _run("--url", srv.url, "-d", "2s", "--api-key-env", "MY_KEY", "--json", env={"MY_KEY": key})
    doc = json.loads(proc.stdout)
    assert doc["verdict"] == "PASS" and proc.returncode == 0, doc["reasons"]
    assert {c["name"] for c in doc["checks"]} >= {"prompt-tokens", "requests"}, doc["checks"]
    assert "***" not in proc.stdout, [line for line in proc.stdout.splitlines() if "***" in line][:3]


@pytest.mark.slow
def test_a_password_in_the_url_is_written_nowhere(tmp_path: Path) -> None:
    with FakeServer(faults=["ok"]) as srv:
        url = srv.url.replace("http://", "http://alice:s3cr3t-pw@")
        proc = _run("--url", url, "-d", "2s", "--json", "--report", str(tmp_path / "r.html"))
    doc = json.loads(proc.stdout)
    assert doc["verdict"] == "PASS", doc["reasons"]
    assert doc["config"]["url"] == srv.url.replace("http://", "http://alice:***@")
    for name, text in _outputs(proc, tmp_path).items():
        assert "s3cr3t-pw" not in text, name


@pytest.mark.slow
def test_a_key_with_a_trailing_newline_is_stripped_and_one_with_a_newline_inside_refused() -> None:
    with FakeServer(faults=["ok"], api_key="abc123") as srv:
        stripped = _run("--url", srv.url, "-d", "2s", "--api-key-env", "MY_KEY", "--json",
                        env={"MY_KEY": "abc123\n"})
        inside = _run("--url", srv.url, "-d", "2s", "--api-key-env", "MY_KEY", env={"MY_KEY": "abc\n123"})
    assert stripped.returncode == 0 and json.loads(stripped.stdout)["verdict"] == "PASS", stripped.stderr[-2000:]
    assert inside.returncode == 2 and "Traceback" not in inside.stderr
    lines = [line for line in inside.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "an HTTP header cannot carry" in lines[0], inside.stderr
