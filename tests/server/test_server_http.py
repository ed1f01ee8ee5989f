"""The reference server over real HTTP, in a real subprocess: endpoints, streaming, tools, images, errors.

Requests here are sequential, so the guard plays no part; the server runs unguarded so these tests do
not depend on it (test_server_race.py covers guard on and off under concurrency). Expected token counts
come from the same tokenizer files, tokenized here on one thread.
"""

from __future__ import annotations

import base64
import http.client
import io
import json
import re
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
from PIL import Image
from prometheus_client.parser import text_string_to_metric_families
from transformers import AutoTokenizer

from borrowguard.data import tokenizer_path
from borrowguard.server import DEFAULT_MODEL, ServerProcess
from support.http import request

pytestmark = pytest.mark.slow  # every test here talks to a real server subprocess

MAX_BODY_MB = 1
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "minLength": 2},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 7}},
        "required": ["city", "unit", "days"]}}}
SEARCH = {"type": "function", "function": {
    "name": "search", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"},
        "filters": {"type": "array", "minItems": 1, "items": {"type": "object", "properties": {
            "field": {"enum": ["title", "body"]}, "weight": {"type": "number", "exclusiveMinimum": 0}},
            "required": ["field", "weight"]}}},
        "required": ["query", "filters"]}}}
USER = [{"role": "user", "content": "What is the weather like in Paris today?"}]


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with ServerProcess(guard=False, workers=2, extra_args=["--max-body-mb", str(MAX_BODY_MB)]) as proc:
        yield proc


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return AutoTokenizer.from_pretrained(str(tokenizer_path()))


def chat(server: ServerProcess, **body: Any) -> Any:
    reply = request(server, "POST", "/v1/chat/completions", body)
    assert reply.status == 200, reply.text
    return reply.json()


def expect_error(reply: Any, status: int, *fragments: str) -> dict[str, Any]:
    assert reply.status == status, reply.text
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    for fragment in fragments:
        assert fragment in error["message"], error["message"]
    return error


def prompt_ids(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
               ) -> list[int]:
    text = tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def png_url(size: tuple[int, int], fmt: str = "PNG") -> str:
    buf = io.BytesIO()
    Image.new("RGB", size, (120, 40, 200)).save(buf, fmt)
    return f"data:image/{fmt.lower()};base64," + base64.b64encode(buf.getvalue()).decode()


def sse_events(server: ServerProcess, body: dict[str, Any]) -> list[Any]:
    reply = request(server, "POST", "/v1/chat/completions", body)
    assert reply.status == 200, reply.text
    assert reply.headers["content-type"].startswith("text/event-stream")
    # The whole body must be a sequence of `data: ...\n\n` events and nothing else.
    assert re.fullmatch(r"(data: [^\n]+\n\n)+", reply.text), reply.text[:500]
    payloads = [event[len("data: "):] for event in reply.text.split("\n\n") if event]
    assert payloads[-1] == "[DONE]"
    return [json.loads(payload) for payload in payloads[:-1]]


# -- basics -----------------------------------------------------------------------------------------


def test_health_models_and_listening_line(server: ServerProcess) -> None:
    assert request(server, "GET", "/health").status == 200
    models = request(server, "GET", "/v1/models").json()
    assert models["object"] == "list"
    [card] = models["data"]
    assert card["id"] == DEFAULT_MODEL and "stub" in card["owned_by"]
    assert re.search(r"^borrowguard serve: listening on http://127\.0\.0\.1:\d+ \(stub engine, guard off\)$",
                     server.output_tail(), re.M)
    assert server.url is not None and server.url.startswith("http://127.0.0.1:")


def test_text_chat_has_real_usage_and_stub_reply(server: ServerProcess, tokenizer: Any) -> None:
    response = chat(server, model=DEFAULT_MODEL, messages=USER)
    assert response["object"] == "chat.completion" and response["model"] == DEFAULT_MODEL
    [choice] = response["choices"]
    assert choice["message"]["role"] == "assistant" and choice["finish_reason"] == "stop"
    content = choice["message"]["content"]
    assert "stub engine" in content
    usage = response["usage"]
    assert usage["prompt_tokens"] == len(prompt_ids(tokenizer, USER))
    assert usage["completion_tokens"] == len(tokenizer(content, add_special_tokens=False)["input_ids"])
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    again = chat(server, messages=USER)  # deterministic: the same request, the same answer
    assert again["choices"][0]["message"]["content"] == content and again["usage"] == usage


def test_max_tokens_cuts_the_reply(server: ServerProcess, tokenizer: Any) -> None:
    full = chat(server, messages=USER)["choices"][0]["message"]["content"]
    response = chat(server, messages=USER, max_tokens=5)
    assert response["choices"][0]["finish_reason"] == "length"
    assert response["usage"]["completion_tokens"] == 5
    assert full.startswith(response["choices"][0]["message"]["content"])
    assert response["choices"][0]["message"]["content"] == tokenizer.decode(
        tokenizer(full, add_special_tokens=False)["input_ids"][:5])


@pytest.mark.parametrize("limit", [7, 19, -1])
def test_truncate_prompt_tokens_keeps_the_end(server: ServerProcess, tokenizer: Any, limit: int) -> None:
    full = prompt_ids(tokenizer, USER)
    response = chat(server, messages=USER, truncate_prompt_tokens=limit)
    expected = len(full) if limit == -1 else min(limit, len(full))
    assert response["usage"]["prompt_tokens"] == expected
    tokens = request(server, "POST", "/tokenize", {"messages": USER}).json()
    assert tokens["tokens"] == full and tokens["count"] == len(full)


def test_tokenize_prompt_and_messages(server: ServerProcess, tokenizer: Any) -> None:
    reply = request(server, "POST", "/tokenize", {"model": DEFAULT_MODEL, "prompt": "Hello <|im_end|> world"})
    assert reply.status == 200
    body = reply.json()
    assert body["tokens"] == tokenizer("Hello <|im_end|> world")["input_ids"]
    assert body["count"] == len(body["tokens"]) and body["max_model_len"] == tokenizer.model_max_length
    tools = [WEATHER]
    body = request(server, "POST", "/tokenize", {"messages": USER, "tools": tools}).json()
    assert body["tokens"] == prompt_ids(tokenizer, USER, tools)


# -- streaming --------------------------------------------------------------------------------------


def test_streaming_matches_the_non_streaming_reply(server: ServerProcess) -> None:
    plain = chat(server, messages=USER, max_tokens=12)
    events = sse_events(server, {"messages": USER, "max_tokens": 12, "stream": True,
                                 "stream_options": {"include_usage": True}})
    assert {event["object"] for event in events} == {"chat.completion.chunk"}
    assert len({event["id"] for event in events}) == 1
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    *content_events, finish, usage = events[1:]
    text = "".join(event["choices"][0]["delta"]["content"] for event in content_events)
    assert text == plain["choices"][0]["message"]["content"]
    assert all(event["choices"][0]["finish_reason"] is None for event in events[:-2])
    assert all(event["usage"] is None for event in events[:-1])
    assert finish["choices"][0] == {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "length"}
    assert usage["choices"] == [] and usage["usage"] == plain["usage"]


def test_streaming_without_usage_sends_no_usage(server: ServerProcess) -> None:
    events = sse_events(server, {"messages": USER, "stream": True})
    assert all("usage" not in event for event in events)
    assert events[-1]["choices"][0]["finish_reason"] == "stop"


# -- tools ------------------------------------------------------------------------------------------


def assert_valid_call(call: dict[str, Any], tool: dict[str, Any]) -> None:
    assert call["type"] == "function" and call["id"]
    assert call["function"]["name"] == tool["function"]["name"]
    arguments = json.loads(call["function"]["arguments"])
    jsonschema.Draft202012Validator(tool["function"]["parameters"]).validate(arguments)
    assert set(arguments) == set(tool["function"]["parameters"]["required"])


def test_tool_choice_required_calls_a_valid_tool(server: ServerProcess, tokenizer: Any) -> None:
    tools = [WEATHER, SEARCH]
    response = chat(server, messages=USER, tools=tools, tool_choice="required")
    [choice] = response["choices"]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    [call] = choice["message"]["tool_calls"]
    assert_valid_call(call, WEATHER)
    assert response["usage"]["prompt_tokens"] == len(prompt_ids(tokenizer, USER, tools))
    assert response["usage"]["completion_tokens"] > len(tokenizer(call["function"]["arguments"])["input_ids"])


def test_named_tool_choice_calls_that_tool(server: ServerProcess) -> None:
    response = chat(server, messages=USER, tools=[WEATHER, SEARCH],
                    tool_choice={"type": "function", "function": {"name": "search"}})
    [call] = response["choices"][0]["message"]["tool_calls"]
    assert_valid_call(call, SEARCH)


@pytest.mark.parametrize("tool_choice", ["auto", "none", None])
def test_auto_and_none_answer_with_text(server: ServerProcess, tool_choice: str | None) -> None:
    body: dict[str, Any] = {"messages": USER, "tools": [WEATHER]}
    if tool_choice is not None:
        body["tool_choice"] = tool_choice
    message = chat(server, **body)["choices"][0]["message"]
    assert "tool_calls" not in message and "stub engine" in message["content"]


def test_streamed_tool_call_reassembles_to_valid_arguments(server: ServerProcess) -> None:
    events = sse_events(server, {"messages": USER, "tools": [SEARCH], "tool_choice": "required",
                                 "stream": True})
    deltas = [event["choices"][0]["delta"] for event in events]
    assert deltas[0] == {"role": "assistant", "content": ""}
    header = deltas[1]["tool_calls"][0]
    assert header["index"] == 0 and header["function"] == {"name": "search", "arguments": ""}
    pieces = [delta["tool_calls"][0]["function"]["arguments"] for delta in deltas[2:-1]]
    assert len(pieces) > 1  # streamed piece by piece, not in one chunk
    call = {"id": header["id"], "type": header["type"],
            "function": {"name": "search", "arguments": "".join(pieces)}}
    assert_valid_call(call, SEARCH)
    assert events[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_assistant_tool_calls_and_tool_results_render(server: ServerProcess, tokenizer: Any) -> None:
    call = {"id": "c1", "type": "function", "function": {
        "name": "get_weather", "arguments": '{"city": "Paris", "unit": "celsius", "days": 1}'}}
    messages = [*USER, {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "18 degrees, sunny"}]
    response = chat(server, messages=messages, tools=[WEATHER])
    assert response["usage"]["prompt_tokens"] == len(prompt_ids(tokenizer, messages, [WEATHER]))


# -- images -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("size", "fmt", "patches"), [((448, 448), "PNG", 256), ((100, 50), "JPEG", 8)])
def test_image_is_expanded_into_one_pad_per_patch(server: ServerProcess, tokenizer: Any,
                                                  size: tuple[int, int], fmt: str, patches: int) -> None:
    image = {"type": "image_url", "image_url": {"url": png_url(size, fmt)}}
    messages = [{"role": "user", "content": [{"type": "text", "text": "Describe the image."}, image]}]
    # One <|image_pad|> in the rendered template becomes `patches` of them.
    expected = len(prompt_ids(tokenizer, messages)) + patches - 1
    assert chat(server, messages=messages)["usage"]["prompt_tokens"] == expected
    tokens = request(server, "POST", "/tokenize", {"messages": messages}).json()["tokens"]
    assert tokens.count(tokenizer.convert_tokens_to_ids("<|image_pad|>")) == patches


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("data:image/png;base64," + base64.b64encode(b"not a png at all").decode(), "cannot decode"),
        ("data:image/png;base64,!!!!", "base64"),
        ("https://example.com/cat.png", "--allow-remote-images"),
        ("file:///etc/passwd", "scheme"),
    ],
)
def test_bad_images_are_400(server: ServerProcess, url: str, fragment: str) -> None:
    messages = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}]
    reply = request(server, "POST", "/v1/chat/completions", {"messages": messages})
    expect_error(reply, 400, "image 0", fragment)


# -- errors -----------------------------------------------------------------------------------------


def test_invalid_json_unknown_model_and_bad_schema_are_400(server: ServerProcess) -> None:
    expect_error(request(server, "POST", "/v1/chat/completions", b"{not json"), 400, "Invalid JSON")
    expect_error(request(server, "POST", "/v1/chat/completions", {"model": "gpt-17", "messages": USER}),
                 400, "gpt-17", "does not exist")
    bad_tool = {"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"x": {"type": "integr"}}}}}
    expect_error(request(server, "POST", "/v1/chat/completions", {"messages": USER, "tools": [bad_tool]}),
                 400, "not a valid JSON schema", "integr")
    expect_error(request(server, "POST", "/tokenize", {"model": "nope", "prompt": "x"}), 400, "does not exist")


def test_oversized_body_is_413_by_content_length(server: ServerProcess) -> None:
    body = json.dumps({"messages": USER, "padding": "x" * (MAX_BODY_MB * 1024 * 1024)}).encode()
    # borrowguard serve's answer names its flag: what the operator who started it would type
    expect_error(request(server, "POST", "/v1/chat/completions", body), 413, "exceeds", "(--max-body-mb)")


def test_oversized_chunked_body_is_413_while_streaming(server: ServerProcess) -> None:
    assert server.url is not None
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    chunk = b" " * 65536  # JSON whitespace: only the size can make this request fail

    def body() -> Iterator[bytes]:
        yield json.dumps({"messages": USER}).encode()
        for _ in range(MAX_BODY_MB * 16 + 4):
            yield chunk

    try:
        conn.request("POST", "/v1/chat/completions", body=body(), encode_chunked=True,
                     headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        assert response.status == 413
        assert "exceeds" in json.loads(response.read())["error"]["message"]
    except (BrokenPipeError, ConnectionResetError):
        pytest.fail("the server closed the connection instead of answering 413")
    finally:
        conn.close()
    # A chunked body within the limit, sent the same way, is accepted.
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        small = iter([json.dumps({"messages": USER}).encode(), chunk])
        conn.request("POST", "/v1/chat/completions", body=small, encode_chunked=True,
                     headers={"Content-Type": "application/json"})
        assert conn.getresponse().status == 200
    finally:
        conn.close()


def test_unknown_path_gets_an_openai_style_404(server: ServerProcess) -> None:
    expect_error(request(server, "GET", "/v1/nothing-here"), 404)


def test_metrics_count_requests_by_status(server: ServerProcess) -> None:
    def samples() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        text = request(server, "GET", "/metrics").text
        return {(s.name, tuple(sorted(s.labels.items()))): s.value
                for family in text_string_to_metric_families(text) for s in family.samples}

    def count(status: int) -> float:
        labels = {"method": "POST", "endpoint": "/v1/chat/completions", "status": str(status)}
        return samples().get(("borrowguard_requests_total", tuple(sorted(labels.items()))), 0)

    before_ok, before_bad = count(200), count(400)
    chat(server, messages=USER)
    request(server, "POST", "/v1/chat/completions", b"[")
    request(server, "POST", "/v1/chat/completions", b"[")
    assert (count(200), count(400)) == (before_ok + 1, before_bad + 2)
    now = samples()
    assert now["borrowguard_requests_in_flight", ()] == 1  # the /metrics request itself
    assert now["borrowguard_tokenizer_errors_total", (("kind", "already_borrowed"),)] == 0
    assert now["borrowguard_guard_installed", ()] == 0


def test_log_file_has_the_vllm_format(server: ServerProcess) -> None:
    lines = [line for line in server.log_path.read_text(encoding="utf-8", errors="replace").splitlines() if line]
    assert lines
    prefix = re.compile(r"^(DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d \[[\w.]+\.py:\d+\] ")
    assert all(prefix.match(line) for line in lines), lines
    assert any("stub engine" in line for line in lines)
