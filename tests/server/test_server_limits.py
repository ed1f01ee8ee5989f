"""Every size a client controls is bounded before the server uses it: tool schemas that ask for
gigabytes of arguments, and prompt texts far too long for the context, are answered 400 at once, and the
server's memory (measured from /proc, on the real subprocess) stays where it was.

No wall-clock assertions: hangs are bounded by generous timeouts, the evidence is the status, the
message and the peak RSS (VmHWM, reset before each request).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from borrowguard.server import ServerProcess
from support.http import request

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")]  # every test here talks to a real server subprocess

GROWTH_LIMIT = 256 << 20  # bytes of peak RSS a refused request may add (the fix needs a few MB)
USER = [{"role": "user", "content": "What is the weather like in Paris today?"}]
HUGE_TOOLS = {
    "minLength": {"type": "object", "properties": {"text": {"type": "string", "minLength": 1_000_000_000}},
                  "required": ["text"]},
    "minItems": {"type": "object", "properties": {"rows": {
        "type": "array", "minItems": 100_000, "items": {"type": "string", "minLength": 100_000}}},
        "required": ["rows"]},
}


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    # The default body limit (20 MB): the text bound must work below it, where the body is accepted.
    with ServerProcess(guard=False, workers=2) as proc:
        yield proc


def _status(pid: int) -> dict[str, int]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) * 1024
    return fields


def _peak_growth(server: ServerProcess, method: str, path: str, body: Any) -> tuple[Any, int]:
    """Send one request; return the reply and how far the server's peak RSS rose above its RSS before."""
    assert server.pid is not None
    try:
        # "5" resets the peak to the current RSS (Linux >= 4.0), so the peak measured is this request's.
        Path(f"/proc/{server.pid}/clear_refs").write_text("5")
    except OSError:
        pass  # not allowed here: the peak so far stands in, which can only under-state the growth
    before = _status(server.pid)
    reply = request(server, method, path, body, timeout=300)  # a bound on a hang, not a speed test
    return reply, _status(server.pid)["VmHWM"] - max(before["VmRSS"], before["VmHWM"])


def _alive(server: ServerProcess) -> None:
    assert server.poll() is None, server.output_tail()
    assert request(server, "GET", "/health", timeout=60).status == 200


@pytest.mark.parametrize("name", list(HUGE_TOOLS))
def test_tool_schema_asking_for_gigabytes_is_400_and_allocates_nothing(server: ServerProcess,
                                                                       name: str) -> None:
    tool = {"type": "function", "function": {"name": "huge", "parameters": HUGE_TOOLS[name]}}
    body = {"messages": USER, "tools": [tool], "tool_choice": "required"}
    reply, growth = _peak_growth(server, "POST", "/v1/chat/completions", body)
    assert reply.status == 400, reply.text[:500]
    error = reply.json()["error"]
    assert error["code"] == "unsupported_tool_schema" and "exceed" in error["message"], error
    assert growth < GROWTH_LIMIT, f"peak RSS rose by {growth >> 20} MiB"
    _alive(server)


@pytest.mark.parametrize(("path", "megabytes"), [("/v1/chat/completions", 19.5), ("/tokenize", 6)])
def test_text_too_long_for_the_context_is_refused_before_tokenizing(server: ServerProcess, path: str,
                                                                    megabytes: float) -> None:
    text = "hello world " * int(megabytes * (1 << 20) / 12)
    body = {"messages": [{"role": "user", "content": text}]} if path != "/tokenize" else {"prompt": text}
    raw = json.dumps(body).encode()
    assert len(raw) < 20 << 20  # under the body limit: this is the text bound at work, not the body's
    reply, growth = _peak_growth(server, "POST", path, raw)
    assert reply.status == 400, reply.text[:500]
    assert "refused before tokenization" in reply.json()["error"]["message"]
    assert growth < GROWTH_LIMIT, f"peak RSS rose by {growth >> 20} MiB"
    _alive(server)


def test_the_bounds_leave_ordinary_requests_alone(server: ServerProcess) -> None:
    tool = {"type": "function", "function": {"name": "note", "parameters": {
        "type": "object", "properties": {"text": {"type": "string", "minLength": 2000}}, "required": ["text"]}}}
    reply = request(server, "POST", "/v1/chat/completions",
                    {"messages": USER, "tools": [tool], "tool_choice": "required"}, timeout=120)
    assert reply.status == 200, reply.text[:500]
    [call] = reply.json()["choices"][0]["message"]["tool_calls"]
    assert len(json.loads(call["function"]["arguments"])["text"]) == 2000
    long_text = "hello world " * 20_000  # 240k characters, about 40k tokens: over 32768, but not refused
    reply = request(server, "POST", "/v1/chat/completions",
                    {"messages": [{"role": "user", "content": long_text}], "truncate_prompt_tokens": 100},
                    timeout=120)
    assert reply.status == 200, reply.text[:500]
    assert reply.json()["usage"]["prompt_tokens"] == 100


@pytest.mark.parametrize("limit", [32769, 2**64, 10**30])
def test_truncation_beyond_the_context_is_a_400_not_a_tokenizer_error(server: ServerProcess,
                                                                      limit: int) -> None:
    # 2**64 and up made the tokenizer's backend raise OverflowError: a 500, logged as a tokenizer error.
    reply = request(server, "POST", "/v1/chat/completions", {"messages": USER, "truncate_prompt_tokens": limit})
    assert reply.status == 400, reply.text[:500]
    assert "is greater than max_model_len (32768)" in reply.json()["error"]["message"]
    assert "OverflowError" not in server.log_path.read_text(encoding="utf-8", errors="replace")
