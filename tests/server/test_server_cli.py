"""`borrowguard serve` as a command and ServerProcess as a launcher: options, user mistakes, stop."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from transformers import AutoTokenizer

from borrowguard.cli import cli
from borrowguard.data import WORDPIECE, tokenizer_path
from borrowguard.errors import BorrowguardError
from borrowguard.server import ServerProcess, ServerStartError
from support.http import request

USER = [{"role": "user", "content": "Count to three."}]


def test_help_teaches_with_examples() -> None:
    result = CliRunner().invoke(cli, ["serve", "--help"])
    assert result.exit_code == 0
    for fragment in ("stub", "--guard [on|off]", "--tokenizer-workers", "--token-delay-ms", "--max-body-mb",
                     "--allow-remote-images", "Examples:", "borrowguard serve --guard off"):
        assert fragment in result.output


@pytest.mark.slow
def test_user_mistakes_exit_2_with_a_message(tmp_path: Path) -> None:
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    cases = {
        "tokenizer directory not found": ["--tokenizer", str(tmp_path / "missing")],
        "cannot load a tokenizer": ["--tokenizer", str(tmp_path)],  # a directory without tokenizer files
        "cannot listen on 127.0.0.1": ["--port", str(busy.getsockname()[1])],
        "--tokenizer-workers must be at least 1": ["--tokenizer-workers", "0"],
        "--max-body-mb must be positive": ["--max-body-mb", "0"],
        "--port must be between 0 and 65535, got 70000": ["--port", "70000"],
        "--token-delay-ms must be >= 0": ["--token-delay-ms", "-1"],
        "--model must not be empty": ["--model", " "],
        "Invalid value for '--guard'": ["--guard", "maybe"],
    }
    # Started together: each one pays the interpreter's start-up, not one after another.
    procs = {
        message: subprocess.Popen([sys.executable, "-m", "borrowguard", "serve", "--guard", "off", *args],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for message, args in cases.items()
    }
    try:
        for message, proc in procs.items():
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 2, (message, out, err)
            assert message in err, (message, err)
            assert "Traceback" not in err + out
            assert "listening on" not in out
    finally:
        busy.close()
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.mark.slow
def test_start_failure_raises_with_the_server_output(tmp_path: Path) -> None:
    with pytest.raises(ServerStartError) as info:
        ServerProcess(guard=False, tokenizer=tmp_path / "missing", start_timeout=60).start()
    assert isinstance(info.value, BorrowguardError)
    assert "exited with code 2" in str(info.value)
    assert "tokenizer directory not found" in info.value.output


@pytest.mark.slow
def test_model_name_token_delay_and_clean_stop(tmp_path: Path) -> None:
    log_path = tmp_path / "serve.log"
    delay_ms, tokens = 30, 8
    server = ServerProcess(guard=False, workers=1, token_delay_ms=delay_ms, log_path=log_path,
                           extra_args=["--model", "tiny-model"])
    with server:
        assert server.log_path == log_path and server.pid is not None and server.poll() is None
        listening = [line for line in server.output_tail(400).splitlines() if "listening on" in line]
        assert len(listening) == 1
        expected = r"borrowguard serve: listening on http://127\.0\.0\.1:\d+ \(stub engine, guard off\)"
        assert re.fullmatch(expected, listening[0])
        assert request(server, "GET", "/v1/models").json()["data"][0]["id"] == "tiny-model"
        for stream in (False, True):
            started = time.monotonic()
            body = {"model": "tiny-model", "messages": USER, "max_tokens": tokens, "stream": stream}
            reply = request(server, "POST", "/v1/chat/completions", body)
            elapsed = time.monotonic() - started
            assert reply.status == 200
            # A lower bound only: the stub must spend at least the configured time per generated token.
            assert elapsed >= tokens * delay_ms / 1000, (stream, elapsed)
        pid = server.pid
        code = server.stop(timeout=120)  # the SIGKILL fallback only after 120 s: a hang, not a busy machine
    assert code != -signal.SIGKILL, "stopped by the SIGKILL fallback, not by SIGTERM"
    assert code is not None and server.poll() is not None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert log_path.exists() and "stopped" in log_path.read_text()  # an explicit log_path is kept


@pytest.mark.slow
def test_any_local_tokenizer_wordpiece() -> None:
    path = tokenizer_path(WORDPIECE)
    tok = AutoTokenizer.from_pretrained(str(path))
    with ServerProcess(guard=False, tokenizer=path, workers=1) as server:
        [card] = request(server, "GET", "/v1/models").json()["data"]
        assert card["id"] == "bert-wordpiece" and card["max_model_len"] == tok.model_max_length
        body = request(server, "POST", "/tokenize", {"prompt": "hello world, hello tokenizer"}).json()
        assert body["tokens"] == tok("hello world, hello tokenizer")["input_ids"]  # with [CLS] ... [SEP]
        reply = request(server, "POST", "/v1/chat/completions", {"messages": USER})
        assert reply.status == 400 and "chat template" in reply.json()["error"]["message"]
        temp_log = server.log_path
        assert temp_log is not None and temp_log.exists()
    assert not temp_log.exists()  # the launcher's own temporary log is removed on stop
