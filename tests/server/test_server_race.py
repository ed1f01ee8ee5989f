"""The point of the reference server: under concurrent mixed load, unguarded, it fails as production does;
guarded, it does not.

Mixed load = identical "probe" chats (no truncation) + the same chat with `truncate_prompt_tokens` +
image chats (image thread, padding) + tool_choice=required chats, from 16 client threads.
- tokenizers <= 0.22 (the old stack): unguarded, some requests get 500 and the log shows
  "RuntimeError: Already borrowed" with its traceback.
- tokenizers >= 0.23.1 (the new stack): unguarded, no exception, but identical probes get different
  `usage.prompt_tokens` (another request's truncation leaks into theirs).
- Guarded (`--guard on`): every request 200, every count exact, nothing in the log.
Expected counts are computed here, single-threaded, from the same tokenizer files.
"""

from __future__ import annotations

import base64
import io
import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest
import tokenizers
from packaging.version import Version
from PIL import Image
from prometheus_client.parser import text_string_to_metric_families
from transformers import AutoTokenizer

from borrowguard.data import tokenizer_path
from borrowguard.server import ServerProcess
from support.http import request

pytestmark = pytest.mark.slow  # every test here talks to a real server subprocess

OLD_STACK = Version(tokenizers.__version__) < Version("0.23")
CLIENTS = 16
TRUNCATE = 16
IMAGE_SIZE = (448, 448)  # 16 x 16 patches of 28 pixels
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {
    "type": "object", "properties": {"key": {"type": "string"}, "exact": {"type": "boolean"}},
    "required": ["key", "exact"]}}}]
TEXT = [{"role": "user", "content": "Summarise these notes on tokenizer thread safety, briefly. " * 12}]


def _image_messages() -> list[dict[str, Any]]:
    buf = io.BytesIO()
    Image.new("RGB", IMAGE_SIZE, (30, 160, 220)).save(buf, "PNG")
    url = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
    return [{"role": "user", "content": [{"type": "text", "text": "What is in this picture?"},
                                         {"type": "image_url", "image_url": {"url": url}}]}]


IMAGE = _image_messages()
# name -> request body; the mix is weighted towards probes, whose counts must all be equal.
BODIES: dict[str, dict[str, Any]] = {
    "probe": {"messages": TEXT, "max_tokens": 2},
    "truncated": {"messages": TEXT, "max_tokens": 2, "truncate_prompt_tokens": TRUNCATE},
    "image": {"messages": IMAGE, "max_tokens": 2},
    "tool": {"messages": TEXT, "tools": TOOLS, "tool_choice": "required"},
}
MIX = ["probe", "truncated", "probe", "image", "probe", "tool"]


@dataclass(frozen=True)
class Result:
    kind: str
    status: int
    prompt_tokens: int | None
    error: dict[str, Any] | None  # the OpenAI-style error object of a non-200 answer


@pytest.fixture(scope="module")
def expected() -> dict[str, int]:
    tok = AutoTokenizer.from_pretrained(str(tokenizer_path()))

    def count(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> int:
        text = tok.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False)
        return len(tok(text, add_special_tokens=False)["input_ids"])

    patches = (IMAGE_SIZE[0] // 28) * (IMAGE_SIZE[1] // 28)
    return {"probe": count(TEXT), "truncated": min(TRUNCATE, count(TEXT)),
            "image": count(IMAGE) - 1 + patches, "tool": count(TEXT, TOOLS)}


def hammer(server: ServerProcess, requests: int, pool: ThreadPoolExecutor, start: int = 0) -> list[Result]:
    def one(i: int) -> Result:
        kind = MIX[i % len(MIX)]
        reply = request(server, "POST", "/v1/chat/completions", BODIES[kind], timeout=60)
        if reply.status == 200:
            return Result(kind, 200, reply.json()["usage"]["prompt_tokens"], None)
        return Result(kind, reply.status, None, reply.json()["error"])

    return list(pool.map(one, range(start, start + requests)))


CONTROL_BUDGET_S = 25.0  # what the unguarded control may spend finding the race; the guarded run gets as much


def hammer_until(server: ServerProcess, seen: Any, budget_s: float = CONTROL_BUDGET_S) -> list[Result]:
    """Load in rounds until `seen(results)` holds or the budget is spent (the race is probabilistic)."""
    results: list[Result] = []
    deadline = time.monotonic() + budget_s
    with ThreadPoolExecutor(CLIENTS) as pool:
        while not seen(results) and time.monotonic() < deadline:
            results += hammer(server, 6 * CLIENTS, pool, start=len(results))
    return results


def metric(server: ServerProcess, name: str, **labels: str) -> float:
    """One sample of the server's /metrics, read by prometheus_client's parser."""
    for family in text_string_to_metric_families(request(server, "GET", "/metrics").text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return sample.value
    raise AssertionError(f"no sample {name} {labels}")


@pytest.fixture
def unguarded() -> Iterator[ServerProcess]:
    with ServerProcess(guard=False, workers=4) as proc:
        yield proc


@pytest.fixture
def guarded() -> Iterator[ServerProcess]:
    with ServerProcess(guard=True, workers=4) as proc:
        yield proc


def test_unguarded_fails_as_production_does(unguarded: ServerProcess, expected: dict[str, int]) -> None:
    # One test, the symptom of whichever stack runs it: both stacks must show their failure, none is skipped.
    if OLD_STACK:
        _old_stack_answers_500_and_logs_already_borrowed(unguarded)
    else:
        _new_stack_leaks_truncation_into_identical_requests(unguarded, expected)


def _old_stack_answers_500_and_logs_already_borrowed(unguarded: ServerProcess) -> None:
    results = hammer_until(unguarded, lambda rs: sum(r.status == 500 for r in rs) >= 3)
    failures = [r for r in results if r.status != 200]
    assert len(failures) >= 3, f"no 'Already borrowed' in {len(results)} concurrent mixed requests"
    for r in failures:
        assert r.status == 500 and r.error is not None and "Already borrowed" in r.error["message"], r
        assert (r.error["type"], r.error["code"], set(r.error)) == (
            "InternalServerError", 500, {"message", "type", "param", "code"})
    log = unguarded.log_path.read_text(encoding="utf-8", errors="replace")
    # vLLM-format ERROR record, then the traceback that `borrowguard scan` recognises.
    assert re.search(r"^ERROR \d\d-\d\d \d\d:\d\d:\d\d \[app\.py:\d+\] Error in preprocessing prompt inputs"
                     r".*\nTraceback \(most recent call last\):\n(?:.*\n)*?RuntimeError: Already borrowed$",
                     log, re.M)
    assert log.count("RuntimeError: Already borrowed") == len(failures)
    assert metric(unguarded, "borrowguard_tokenizer_errors_total", kind="already_borrowed") == len(failures)
    status_500 = {"method": "POST", "endpoint": "/v1/chat/completions", "status": "500"}
    assert metric(unguarded, "borrowguard_requests_total", **status_500) == len(failures)


def _new_stack_leaks_truncation_into_identical_requests(unguarded: ServerProcess,
                                                        expected: dict[str, int]) -> None:
    def leaked(rs: list[Result]) -> bool:
        return any(r.kind == "probe" and r.prompt_tokens not in (None, expected["probe"]) for r in rs)

    results = hammer_until(unguarded, leaked)
    probes = [r.prompt_tokens for r in results if r.kind == "probe" and r.status == 200]
    assert len(set(probes)) > 1, f"{len(probes)} identical probes all got {set(probes)} prompt tokens"
    assert expected["probe"] in probes  # most are right, some silently are not
    assert "Already borrowed" not in unguarded.log_path.read_text(encoding="utf-8", errors="replace")


def test_guarded_is_exact_under_the_same_load(guarded: ServerProcess, expected: dict[str, int]) -> None:
    assert "guard on" in guarded.output_tail()
    # At least the unguarded control's whole budget, and at least 40 requests per client: a weak guard
    # must not pass by being tried for less time than the failure took to show.
    results: list[Result] = []
    started = time.monotonic()
    with ThreadPoolExecutor(CLIENTS) as pool:
        while len(results) < 40 * CLIENTS or time.monotonic() - started < CONTROL_BUDGET_S:
            results += hammer(guarded, 6 * CLIENTS, pool, start=len(results))
    bad = [r for r in results if r.status != 200 or r.prompt_tokens != expected[r.kind]]
    assert not bad, f"{len(bad)} of {len(results)} wrong, e.g. {bad[:3]} (expected {expected})"
    log = guarded.log_path.read_text(encoding="utf-8", errors="replace")
    assert "Already borrowed" not in log and "Traceback" not in log and "\nERROR " not in log
    assert metric(guarded, "borrowguard_guard_installed") == 1
    assert metric(guarded, "borrowguard_tokenizer_errors_total", kind="already_borrowed") == 0
