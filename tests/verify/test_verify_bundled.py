"""`borrowguard verify` end to end against the bundled reference server, started by verify itself.

Unguarded, the server fails the way vLLM does on this stack: on tokenizers <= 0.22 with 500s and
"Already borrowed" in its log, on >= 0.23 silently, with identical requests counted differently.
Guarded, the same load passes. Both run through the real CLI in a subprocess, as an operator would.
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.version import Version

pytestmark = pytest.mark.slow  # every test here talks to a real server subprocess

BORROW_STACK = Version(version("tokenizers")) < Version("0.23")
ARGS = ["--concurrency", "16", "--image-sizes", "256x256,512x384", "--json"]


def _verify(*args: str, timeout: float = 240) -> tuple[int, dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "borrowguard", "verify", *ARGS, *args],
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    assert proc.stdout, proc.stderr[-3000:]
    return proc.returncode, json.loads(proc.stdout)


def test_unguarded_bundled_server_fails(tmp_path: Path) -> None:
    server_log = tmp_path / "server.log"
    code, doc = _verify("--server-guard", "off", "--duration", "8s", "--server-log", str(server_log))
    assert code == 1 and doc["verdict"] == "FAIL"
    assert doc["target"]["bundled_server"] is True and doc["target"]["server_guard"] is False
    codes = {r["code"] for r in doc["reasons"]}
    if BORROW_STACK:
        # the log signature and the 500s it causes, both seen
        assert {"tokenizer-errors", "request-errors"} <= codes, doc["reasons"]
        assert doc["log"]["finding_counts"]["tokenizer-already-borrowed"] == server_log.read_text().count(
            "RuntimeError: Already borrowed"
        )
        statuses = doc["levels"][0]["summary"]["errors_by_status"]
        assert any(g["status"] == "500" and "Already borrowed" in " ".join(g["messages"]) for g in statuses)
    else:
        # no exception anywhere: only the identical-request comparison can see it
        assert "prompt-tokens-mismatch" in codes, doc["reasons"]
        assert doc["levels"][0]["summary"]["errors"] == 0
        assert "Already borrowed" not in server_log.read_text()
    assert "engine-dead" not in codes


def test_guarded_bundled_server_passes(tmp_path: Path) -> None:
    report, records = tmp_path / "report.html", tmp_path / "records.jsonl"
    code, doc = _verify("--duration", "8s", "--stream", "--report", str(report), "--records", str(records))
    assert code == 0 and doc["verdict"] == "PASS", doc["reasons"]
    summary = doc["levels"][0]["summary"]
    assert summary["errors"] == 0 and summary["ok"] > 50
    for name, scenario in summary["scenarios"].items():
        assert scenario["ok"] > 5, name
        if name != "tokenize":  # /tokenize answers at once: no stream, no first token
            assert scenario["ttft_s"]["p50"] is not None
    repeats = summary["repeats"]
    assert len(repeats) == 6 and all(r["consistent"] and r["prompt_tokens"] for r in repeats.values())
    # every endpoint of the mix was reached, and nothing was the workload's fault
    # (the default mix probes the pooling endpoints too: the bundled chat server serves none of them)
    served = {path for path, ok in doc["target"]["endpoints"].items() if ok}
    assert served == {"/v1/chat/completions", "/tokenize", "/detokenize", "/v1/completions"}, doc["target"]
    assert set(doc["target"]["endpoints"]) - served == {
        "/v1/embeddings", "/score", "/rerank", "/v1/rerank", "/pooling", "/classify"}
    assert all(state == "accepted" for state in doc["target"]["scenarios"].values())
    assert {c["name"]: c["state"] for c in doc["checks"]} == {
        "log": "passed", "requests": "passed", "prompt-tokens": "passed", "health": "passed"}
    assert doc["log"]["lines"] > 0 and not any(
        k.startswith("tokenizer") for k in doc["log"]["finding_counts"]
    )
    assert len(records.read_text().splitlines()) == summary["requests"]
    assert report.read_text().count("<svg") == 4
