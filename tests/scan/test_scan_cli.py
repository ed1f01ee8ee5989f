"""`borrowguard scan` as users run it: real subprocesses, real files, exit codes, JSON, follow mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from borrowguard.cli import cli

LOGS = Path(__file__).parents[1] / "fixtures" / "logs"


def run(*args: str, stdin: bytes | None = None, timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "COLUMNS": "160"}
    return subprocess.run(
        [sys.executable, "-m", "borrowguard", "scan", *args],
        input=stdin, capture_output=True, timeout=timeout, env=env, check=False,
    )


@pytest.mark.slow
def test_exit_codes_follow_the_worst_severity() -> None:
    assert run(str(LOGS / "near_misses.log")).returncode == 0
    assert run(str(LOGS / "shm_stall.log")).returncode == 1
    assert run(str(LOGS / "vllm_v1_borrow_chain.log")).returncode == 2


@pytest.mark.slow
def test_json_output() -> None:
    proc = run("--json", str(LOGS / "vllm_v1_borrow_chain.log"), str(LOGS / "shm_stall.log"))
    doc = json.loads(proc.stdout)
    assert proc.returncode == 2
    assert doc["lines"] == 39 + 6
    ids = [f["id"] for f in doc["findings"]]
    assert ids[:2] == ["tokenizer-already-borrowed", "engine-dead"]
    assert "shm-broadcast-stall" in ids
    first = doc["findings"][0]
    assert first["first"] == {
        "source": str(LOGS / "vllm_v1_borrow_chain.log"), "line": 23, "timestamp": "07-07 20:12:45",
    }
    assert first["process"] == "APIServer pid=2841"
    assert first["excerpt"] == "RuntimeError: Already borrowed"
    assert next(s["id"] for s in doc["chain"] if s["role"] != "environment") == "tokenizer-already-borrowed"


@pytest.mark.slow
def test_stdin_and_rich_report() -> None:
    proc = run("-", stdin=(LOGS / "vllm_v1_borrow_chain.log").read_bytes())
    out = proc.stdout.decode()
    assert proc.returncode == 2
    assert "tokenizer-already-borrowed" in out
    text = " ".join(out.split())
    assert "tokenizer-already-borrowed → tokenizer-acquire-retry → http-error-status: fix the tokenizer race first" in text
    assert "engine-dead: EngineCore's own final exception: ValueError: Request chatcmpl-41 has no cached" in text
    assert "server vLLM 0.19.1 · model Qwen/Qwen2.5-VL-7B-Instruct" in text
    assert "│ high" in out  # the confidence column
    assert "pip install borrowguard" in out


@pytest.mark.slow
def test_clean_log_says_so() -> None:
    proc = run(str(LOGS / "near_misses.log"))
    assert b"No known failure signatures" in proc.stdout
    assert proc.returncode == 0


def test_a_long_read_without_the_matcher_says_how_to_speed_it_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from borrowguard.scan import fast

    log = tmp_path / "vllm.log"
    log.write_text('INFO:     127.0.0.1:5 - "GET /health HTTP/1.1" 200 OK\n' * 40)
    monkeypatch.setattr(fast, "SLOW_LINES", 30)
    installed = fast._aho  # ahocorasick-rs, a dev dependency through [all]
    for matcher in (None, installed) if installed is not None else (None,):
        monkeypatch.setattr(fast, "_aho", matcher)
        result = CliRunner().invoke(cli, ["scan", str(log)])
        assert result.exit_code == 0, result.output
        said = "borrowguard[scan]" in result.output and "read 40 lines" in result.output
        assert said is (matcher is None), result.output
    monkeypatch.setattr(fast, "SLOW_LINES", 41)
    monkeypatch.setattr(fast, "_aho", None)
    assert "borrowguard[scan]" not in CliRunner().invoke(cli, ["scan", str(log)]).output


@pytest.mark.slow
def test_user_mistakes_are_messages_not_tracebacks(tmp_path: Path) -> None:
    for args in (
        [str(tmp_path / "missing.log")],
        [str(tmp_path / "*.nothing")],
        [str(tmp_path)],
        ["--for", "3", str(LOGS / "shm_stall.log")],
        ["--follow-cmd", "no-such-command-xyz"],
    ):
        proc = run(*args)
        assert proc.returncode == 2, args
        assert proc.stderr.startswith(b"borrowguard: error: "), (args, proc.stderr)
        assert b"Traceback" not in proc.stderr


@pytest.mark.slow
def test_bad_rules_file_names_rule_and_field(tmp_path: Path) -> None:
    rules = tmp_path / "r.toml"
    rules.write_text(
        '[[problem]]\nid = "x-y"\ntitle = "t"\nseverity = "error"\nexplanation = "e"\n'
        '[[problem.signature]]\nmessage = ["("]\n'
    )
    proc = run("--rules", str(rules), str(LOGS / "shm_stall.log"))
    assert proc.returncode == 2
    assert b"rule 'x-y': signature #1: field 'message' item 1" in proc.stderr


@pytest.mark.slow
def test_hostile_log_cannot_style_the_terminal(tmp_path: Path) -> None:
    log = tmp_path / "evil.log"
    log.write_bytes(b"RuntimeError: Already borrowed [link=http://evil]x[/link] \x1b]0;pwn\x07 \x07\x1b[2J\n")
    proc = run(str(log))
    assert proc.returncode == 2
    assert b"\x1b" not in proc.stdout and b"\x07" not in proc.stdout
    assert b"[link=http://evil]" in proc.stdout  # printed as text, not interpreted


def test_help_teaches() -> None:
    result = CliRunner().invoke(cli, ["scan", "--help"])
    assert result.exit_code == 0
    assert "Examples:" in result.output
    assert "--follow-cmd" in result.output
    assert "Exit status" in result.output


@pytest.mark.slow
def test_follow_a_growing_file_for_a_while(tmp_path: Path) -> None:
    log = tmp_path / "live.log"
    log.write_text("INFO 07-07 20:12:44 [a.py:1] starting\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "borrowguard", "scan", "--json", "--follow", "--for", "4", str(log)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    try:
        time.sleep(1.0)
        with log.open("a") as fh:
            fh.write("WARNING 07-07 20:12:50 [shm_broadcast.py:466] No available shared memory broadcast "
                     "block found in 60 seconds.\n")
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    doc = json.loads(out)
    assert proc.returncode == 1, err
    assert [f["id"] for f in doc["findings"]] == ["shm-broadcast-stall"]
    assert doc["lines"] == 2


@pytest.mark.slow
def test_follow_cmd_until_it_exits() -> None:
    code = "print('(APIServer pid=3) ERROR 07-07 20:00:00 [x.py:1] AsyncLLM output_handler failed.')"
    proc = run("--follow-cmd", f"{sys.executable} -c \"{code}\"")
    out = proc.stdout.decode()
    assert proc.returncode == 2
    assert "engine-dead" in out
    assert "$ " in out  # the live line names the command as the source


@pytest.mark.slow
def test_credentials_in_matched_lines_never_reach_the_report(tmp_path: Path) -> None:
    log = tmp_path / "access.log"
    log.write_text(
        'INFO:     1.2.3.4:5 - "GET /v1/models?api_key=sk-live0123456789abcdef HTTP/1.1" 401 Unauthorized\n'
        "ERROR 07-07 20:12:44 [x.py:1] NCCL error with Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.x\n"
    )
    for args in (["--json"], []):
        proc = run(*args, str(log))
        assert proc.returncode == 2
        assert b"sk-live0123456789abcdef" not in proc.stdout
        assert b"eyJhbGciOiJIUzI1NiJ9" not in proc.stdout
        assert b"[redacted]" in proc.stdout
