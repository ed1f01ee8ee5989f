"""Lying servers, real ones: small HTTP servers in subprocesses on 127.0.0.1 (support/fakeserver.py) whose
answers contradict themselves or what the preflight saw. `borrowguard verify` (the CLI, as a user runs it)
must never say PASS to any of them (issue 23) — and it must say why, naming the server's answers.

Each of these got PASS, exit 0 before issue 23: a context-length refusal even at our smallest prompts, the
model gone after the preflight (404), a context-length refusal its own numbers contradict, a 400 naming a
server-side TypeError, a 200 carrying an error object, /tokenize claiming 10^15 tokens; and one that answers
identical requests consistently under load but not what the same request got alone (only the serial
reference shows it). And with no `usage` in any answer, the PASS line must not claim the consistency check.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from support.fakeserver import FakeServer

pytestmark = pytest.mark.slow  # every test here starts a server subprocess

PREFLIGHT_CHATS = 4  # the preflight's chat/completion probes: discovery (2) and the image/tools acceptance (2)


def verify(srv: FakeServer, *extra: str, requests: int = 120) -> tuple[int, dict, str]:
    """(exit code, the --json document, the text output of a second identical run's PASS/FAIL line)."""
    args = [sys.executable, "-m", "borrowguard", "verify", "--url", srv.url, "-n", str(requests), "-c", "4",
            "--image-sizes", "64x64", *extra]
    proc = subprocess.run([*args, "--json"], capture_output=True, text=True, timeout=300)
    assert proc.stdout, proc.stderr[-2000:]
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def _after_preflight(fault: str) -> list[str]:
    """The preflight's probes answered right, then every chat and completion gets `fault`."""
    return ["ok"] * PREFLIGHT_CHATS + [fault] * 5000


def _server_groups(doc: dict) -> list[dict]:
    return [g for g in doc["levels"][0]["summary"]["errors_by_status"] if g["fault"] != "workload"]


@pytest.mark.parametrize(
    ("faults", "tokenize", "said"),
    [
        # every prompt refused as too long, even at our smallest scale; /tokenize works (it used to hide this)
        (_after_preflight("too-long"), "ok", "maximum context length is 4096"),
        # the model vanished after the preflight: a 404 on an endpoint that answered is the server's
        (_after_preflight("model-404"), "none", "does not exist"),
        # "too long" with numbers that say it fits
        (["ok", "ok", "bad-context"], "none", "request has 30 input tokens"),
        # a bug in the server's code, said in a 400 (it is no "unknown field" of ours)
        (["ok", "ok", "typeerror-400"], "none", "TypeError"),
        # /tokenize claims 10^15 tokens: the preflight ignores the count, the load counts it as a broken answer
        (["ok"], "huge", "/tokenize claimed 1000000000000000 tokens"),
    ],
    ids=["too-long-at-every-scale", "model-gone-after-preflight", "contradictory-context", "typeerror-400",
         "tokenize-claims-1e15"],
)
def test_a_lying_server_fails_naming_its_answers(faults: list[str], tokenize: str, said: str) -> None:
    with FakeServer(faults=faults, tokenize=tokenize) as srv:
        code, doc, err = verify(srv)
    assert (code, doc["verdict"]) == (1, "FAIL"), (doc["verdict"], doc["reasons"], err[-1500:])
    request_errors = [r for r in doc["reasons"] if r["code"] == "request-errors"]
    assert request_errors and said in request_errors[0]["message"], doc["reasons"]
    groups = _server_groups(doc)
    assert groups and any(said in m for g in groups for m in g["messages"]), groups


def test_a_200_carrying_an_error_object_is_a_failure() -> None:
    with FakeServer(faults=["ok", "ok", "error-200"]) as srv:
        code, doc, _ = verify(srv)
    assert (code, doc["verdict"]) == (1, "FAIL"), doc["reasons"]
    codes = [r["code"] for r in doc["reasons"]]
    assert "tokenizer-errors" in codes and "request-errors" in codes, doc["reasons"]  # its message: Already borrowed
    assert any(g["status"] == "stream-error" for g in _server_groups(doc))


def test_answers_consistent_under_load_but_not_what_the_request_got_alone_fail() -> None:
    # Every identical request under load gets the same count, 5 above what it got when first sent alone:
    # compared only with each other they agree; the serial reference shows the lie.
    with FakeServer(faults=["drift"]) as srv:
        code, doc, _ = verify(srv, "--mix", "text=1")
    assert (code, doc["verdict"]) == (1, "FAIL"), doc["reasons"]
    (reason,) = [r for r in doc["reasons"] if r["code"] == "prompt-tokens-mismatch"][:1]
    assert "sent alone before the load it got" in reason["message"], reason
    repeats = doc["levels"][0]["summary"]["repeats"]
    drifted = [r for r in repeats.values() if r["reference"] is not None]
    assert drifted and all(r["consistent"] for r in drifted), repeats  # consistent among themselves...
    assert all(set(r["prompt_tokens"]) == {str(r["reference"] + 5)} for r in drifted), repeats  # ...and wrong
    assert doc["levels"][0]["summary"]["ok"] == doc["levels"][0]["summary"]["requests"]


def test_without_usage_in_any_answer_the_pass_line_does_not_claim_consistency() -> None:
    with FakeServer(faults=["no-usage"]) as srv:
        code, doc, _ = verify(srv, "--mix", "text=1,tools=1")
        text = subprocess.run([sys.executable, "-m", "borrowguard", "verify", "--url", srv.url, "-n", "60", "-c", "4",
                               "--mix", "text=1,tools=1"], capture_output=True, text=True, timeout=300)
    assert (code, doc["verdict"]) == (0, "PASS"), doc["reasons"]
    checks = {c["name"]: c for c in doc["checks"]}
    assert checks["prompt-tokens"]["state"] == "not-run", checks
    assert "vectors" not in checks  # no pooling answer came back: not a check this server has
    assert checks["requests"]["state"] == "passed" and checks["requests"]["detail"].startswith("120 of 120 ")
    (line,) = [ln for ln in text.stdout.splitlines() if ln.startswith("PASS")]
    assert "usage.prompt_tokens" not in line and "identical" not in line, line
    assert "60 of 60 valid requests got a 2xx" in line, line
    assert "not checked: prompt-tokens" in text.stdout


def test_empty_500s_on_bad_words_requests_are_tied_to_them_with_how_to_see_the_error() -> None:
    # vLLM encodes bad_words on its own path; when that tokenizer call raises, it answers 500 with an empty message
    with FakeServer(faults=["bad-words-500"]) as srv:
        code, doc, _ = verify(srv, "--mix", "text=1,tools=1")
    assert (code, doc["verdict"]) == (1, "FAIL"), doc["reasons"]
    summary = doc["levels"][0]["summary"]
    assert summary["empty_5xx"] == summary["empty_5xx_bad_words"] > 0, summary
    (reason,) = [r for r in doc["reasons"] if r["code"] == "request-errors"]
    assert f"{summary['empty_5xx']} of them on requests with bad_words" in reason["message"], reason
    assert "--enable-log-requests" in reason["message"], reason
