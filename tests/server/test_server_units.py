"""The server's pure parts, in process: image bounds and decoding, tool schemas, request parsing, logs."""

from __future__ import annotations

import base64
import io
import logging
import re
import struct
import zlib

import jsonschema
import pytest
from PIL import Image
from prometheus_client.parser import text_string_to_metric_families

from borrowguard.errors import ConfigError
from borrowguard.server import logs
from borrowguard.server.config import ServerConfig
from borrowguard.server.images import ImageBounds, ImageError, load_bytes, patch_count, smart_resize
from borrowguard.server.metrics import Metrics
from borrowguard.server.protocol import APIError, parse_chat, parse_json, parse_tokenize
from borrowguard.server.tools import ToolSchemaError, example_arguments, validate_parameters

BOUNDS = ImageBounds()


def encoded(size: tuple[int, int], fmt: str = "PNG") -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, (10, 200, 90)).save(buf, fmt)
    return buf.getvalue()


def data_url(raw: bytes, media: str = "image/png") -> str:
    return f"data:{media};base64," + base64.b64encode(raw).decode()


# -- images -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("height", "width", "expected"),
    [
        (448, 448, (448, 448)),  # already multiples of 28
        (50, 100, (56, 112)),  # rounded to multiples of 28, area above min_pixels
        (10, 10, (56, 56)),  # scaled up to min_pixels (4 patches)
        (2000, 3000, (812, 1204)),  # scaled down under max_pixels: beta = sqrt(6e6 / 1003520)
    ],
)
def test_smart_resize_matches_qwen_vl(height: int, width: int, expected: tuple[int, int]) -> None:
    h, w = smart_resize(height, width, BOUNDS)
    assert (h, w) == expected
    assert h % 28 == 0 and w % 28 == 0
    assert BOUNDS.min_pixels <= h * w <= BOUNDS.max_pixels


def test_extreme_aspect_ratio_is_refused() -> None:
    with pytest.raises(ImageError, match="aspect ratio"):
        smart_resize(10, 5000, BOUNDS)


@pytest.mark.parametrize(("size", "fmt", "patches"), [((448, 448), "PNG", 256), ((100, 50), "JPEG", 8),
                                                       ((3000, 2000), "PNG", 29 * 43)])
def test_patch_count_decodes_and_resizes(size: tuple[int, int], fmt: str, patches: int) -> None:
    assert patch_count(encoded(size, fmt), BOUNDS) == patches


def test_data_url_round_trip_and_refusals() -> None:
    raw = encoded((64, 64))
    assert load_bytes(data_url(raw), BOUNDS, allow_remote=False) == raw
    with pytest.raises(ImageError, match="start the server with allow_remote_images ") as refused:
        load_bytes("https://example.com/cat.png", BOUNDS, allow_remote=False)
    assert "--" not in str(refused.value)  # the library names its setting; serve says its flag
    with pytest.raises(ImageError, match="scheme"):
        load_bytes("file:///etc/passwd", BOUNDS, allow_remote=True)
    with pytest.raises(ImageError, match="base64"):
        load_bytes("data:image/png;base64,@@@not-base64@@@", BOUNDS, allow_remote=False)
    with pytest.raises(ImageError, match="not an image"):
        load_bytes(data_url(raw, "text/html"), BOUNDS, allow_remote=False)
    with pytest.raises(ImageError, match="data:image/png;base64"):
        load_bytes("data:image/png,rawbytes", BOUNDS, allow_remote=False)


def test_undecodable_and_truncated_images_are_image_errors() -> None:
    with pytest.raises(ImageError, match="cannot decode"):
        patch_count(b"definitely not an image", BOUNDS)
    raw = encoded((300, 300))
    with pytest.raises(ImageError, match="cannot decode"):
        patch_count(raw[: len(raw) // 2], BOUNDS)


def _png_claiming(width: int, height: int) -> bytes:
    """A PNG whose header claims a huge size over a tiny payload: a decompression bomb's shape."""
    def chunk(kind: bytes, payload: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + payload))
        return struct.pack(">I", len(payload)) + kind + payload + crc

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 16)) + chunk(
        b"IEND", b"")


def test_huge_declared_size_is_refused_before_decoding() -> None:
    with pytest.raises(ImageError, match="exceeds 40000000 pixels"):  # our budget, under Pillow's own
        patch_count(_png_claiming(8_000, 8_000), BOUNDS)
    with pytest.raises(ImageError, match="decompression-bomb"):  # Pillow's limit, hit while opening
        patch_count(_png_claiming(20_000, 20_000), BOUNDS)


# -- tool schemas -----------------------------------------------------------------------------------

SCHEMAS = [
    {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
     "required": ["city", "unit"]},
    {"type": "object", "properties": {
        "n": {"type": "integer", "minimum": 5, "maximum": 9, "multipleOf": 3},
        "x": {"type": "number", "exclusiveMinimum": 0.25, "exclusiveMaximum": 1},
        "tags": {"type": "array", "items": {"type": "string", "minLength": 8}, "minItems": 2, "maxItems": 3},
        "flag": {"type": "boolean"},
        "when": {"type": "string", "format": "date-time"},
        "nested": {"type": "object", "properties": {"id": {"type": ["null", "integer"]}}, "required": ["id"],
                   "additionalProperties": False},
        "choice": {"anyOf": [{"type": "string", "maxLength": 2}, {"type": "integer"}]},
        "both": {"allOf": [{"type": "object", "properties": {"a": {"const": 1}}, "required": ["a"]},
                           {"properties": {"b": {"type": "string"}}, "required": ["b"]}]},
        "ref": {"$ref": "#/$defs/Point"},
    }, "required": ["n", "x", "tags", "flag", "when", "nested", "choice", "both", "ref"],
     "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                         "required": ["x", "y"]}}},
    {"type": "object", "properties": {}},
]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_example_arguments_satisfy_the_schema(schema: dict) -> None:
    validate_parameters(schema)
    arguments = example_arguments(schema)
    # An independent validator is the judge, not our own traversal.
    jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker()).validate(arguments)
    assert set(arguments) == set(schema.get("required", []))


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ("not an object", "must be a JSON object"),
        ({"type": "array"}, "top-level type"),
        ({"type": "object", "properties": {"a": {"type": "strnig"}}},
         "parameters.properties.a.type: 'strnig' is not one of array, boolean"),
        ({"type": "object", "properties": []}, "parameters.properties: [] is not of type 'object'"),
        ({"type": "object", "required": "a"}, "parameters.required: 'a' is not of type 'array'"),
        ({"type": "object", "properties": {"a": {"anyOf": []}}}, "anyOf: [] should be non-empty"),
        ({"type": "object", "properties": {"a": {"$ref": "http://evil/schema"}}}, "only local references"),
        ({"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}, "does not resolve"),
        ({"type": "object", "properties": {"a": {"$ref": "#nowhere"}}}, "does not resolve"),
        ({"type": "object", "properties": {"a": {"minimum": "3"}}}, "minimum: '3' is not of type 'number'"),
        ({"type": "object", "properties": {"a": {"minLength": -1}}}, "less than the minimum of 0"),
        ({"type": "object", "$schema": {"evil": 1}}, "$schema must be a string"),
        ({"type": "object", "properties": {"a": {"enum": ["x" * 10_000, 1]}}, "uniqueItems": "yes"},
         "is not of type 'boolean'"),
    ],
)
def test_malformed_schemas_are_rejected(schema: object, message: str) -> None:
    with pytest.raises(ToolSchemaError, match=re.escape(message)):
        validate_parameters(schema)


def test_hostile_schema_depth_is_bounded() -> None:
    schema: dict = {"type": "object"}
    node = schema
    for _ in range(100):
        node["properties"] = {"a": {"type": "object"}}
        node = node["properties"]["a"]
    with pytest.raises(ToolSchemaError, match="deeper"):
        validate_parameters(schema)


# -- request parsing --------------------------------------------------------------------------------

USER = [{"role": "user", "content": "hi"}]
TOOL = {"type": "function", "function": {"name": "f", "parameters": SCHEMAS[0]}}


def test_parse_chat_defaults_and_fields() -> None:
    chat = parse_chat({"messages": USER})
    assert (chat.model, chat.stream, chat.include_usage, chat.max_tokens, chat.truncate_prompt_tokens) == (
        None, False, False, None, None)
    assert chat.tool_choice.mode == "none" and chat.tool_dicts is None
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}
    content = [{"type": "text", "text": "a"}, image]
    chat = parse_chat({"model": "m", "messages": [{"role": "user", "content": content}],
        "tools": [TOOL], "tool_choice": {"type": "function", "function": {"name": "f"}}, "stream": True,
        "stream_options": {"include_usage": True}, "max_completion_tokens": 7, "truncate_prompt_tokens": -1})
    assert chat.image_urls == ["data:image/png;base64,AA=="]
    assert (chat.tool_choice.mode, chat.tool_choice.name) == ("named", "f")
    assert (chat.stream, chat.include_usage) == (True, True)
    assert (chat.max_tokens, chat.truncate_prompt_tokens) == (7, -1)
    assert chat.tool_dicts == [TOOL]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([], "must be a JSON object"),
        ({}, "'messages' must be a non-empty array"),
        ({"messages": [{"role": "wizard", "content": "x"}]}, "role must be one of"),
        ({"messages": [{"role": "user", "content": [{"type": "audio"}]}]}, "not supported"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "image_url.url"),
        ({"messages": USER, "tool_choice": "required"}, "requires 'tools'"),
        ({"messages": USER, "tools": [TOOL], "tool_choice": {"type": "function", "function": {"name": "g"}}},
         "not among the request's tools"),
        ({"messages": USER, "tools": [TOOL, TOOL]}, "duplicate tool name"),
        ({"messages": USER, "tools": [{"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "properties": {"a": {"type": "bogus"}}}}}]}, "not a valid JSON schema"),
        ({"messages": USER, "truncate_prompt_tokens": 0}, "truncate_prompt_tokens"),
        ({"messages": USER, "max_tokens": True}, "'max_tokens' must be an integer"),
        ({"messages": USER, "stream_options": {"include_usage": True}}, "only allowed when 'stream'"),
        ({"messages": USER, "n": 2}, "n=1"),
        ({"messages": [{"role": "assistant", "content": None, "tool_calls": [{"function": {"name": 5}}]}]},
         "function.name must be a string"),
        ({"messages": [{"role": "assistant", "content": None, "tool_calls": "call"}]}, "must be an array"),
    ],
)
def test_parse_chat_rejects_with_a_clear_400(body: object, message: str) -> None:
    with pytest.raises(APIError) as info:
        parse_chat(body)
    assert info.value.status == 400
    assert message in info.value.message
    error = info.value.body()["error"]
    assert set(error) == {"message", "type", "param", "code"}


def test_parse_json_rejects_garbage_and_deep_nesting() -> None:
    assert parse_json(b'{"a": [1]}') == {"a": [1]}
    for body in (b"{not json", b"\xff\xfe", b"[" * 200_000 + b"]" * 200_000):
        with pytest.raises(APIError) as info:
            parse_json(body)
        assert info.value.status == 400 and "Invalid JSON" in info.value.message


def test_parse_tokenize_prompt_or_messages() -> None:
    req = parse_tokenize({"prompt": "hello", "add_special_tokens": False})
    assert (req.prompt, req.add_special_tokens, req.chat) == ("hello", False, None)
    req = parse_tokenize({"model": "m", "messages": USER})
    assert req.chat is not None and req.chat.messages == USER and req.model == "m"
    with pytest.raises(APIError, match="needs 'prompt'"):
        parse_tokenize({"prompt": 3})


# -- metrics and logs -------------------------------------------------------------------------------


def test_metrics_text_exposition() -> None:
    metrics = Metrics(guard=True)
    metrics.requests[("POST", "/v1/chat/completions", 500)] += 3
    metrics.record_tokenizer_error(RuntimeError("Already borrowed"))
    metrics.record_tokenizer_error(ValueError("other"))
    text = metrics.render()
    # prometheus_client's own parser reads it back: names, types, labels and values.
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert {name: f.type for name, f in families.items()} == {
        "borrowguard_requests": "counter", "borrowguard_requests_in_flight": "gauge",
        "borrowguard_tokenizer_errors": "counter", "borrowguard_prompt_tokens": "counter",
        "borrowguard_generation_tokens": "counter", "borrowguard_guard_installed": "gauge"}
    samples = {(s.name, tuple(s.labels.items())): s.value for f in families.values() for s in f.samples}
    assert samples["borrowguard_requests_total", (
        ("endpoint", "/v1/chat/completions"), ("method", "POST"), ("status", "500"))] == 3
    assert samples["borrowguard_tokenizer_errors_total", (("kind", "already_borrowed"),)] == 1
    assert samples["borrowguard_tokenizer_errors_total", (("kind", "truncation_error"),)] == 0
    assert samples["borrowguard_tokenizer_errors_total", (("kind", "ValueError"),)] == 1
    assert samples["borrowguard_guard_installed", ()] == 1
    assert not any(name.endswith("_created") for name, _ in samples)  # counts only, no timestamps


def test_each_app_has_its_own_registry() -> None:
    # Two servers in one process (tests do that) must not see each other's counts.
    first, second = Metrics(guard=True), Metrics(guard=False)
    first.prompt_tokens = 7
    assert "borrowguard_prompt_tokens_total 7.0" in first.render()
    assert "borrowguard_prompt_tokens_total 0.0" in second.render()


def test_log_format_is_vllm_like(tmp_path, capsys) -> None:
    log_file = tmp_path / "server.log"
    uvicorn_loggers = [logging.getLogger(name) for name in ("uvicorn", "uvicorn.error")]
    saved = [(lg, lg.handlers[:], lg.propagate) for lg in uvicorn_loggers]
    logger = logs.configure(log_file)
    try:
        try:
            raise RuntimeError("Already borrowed")
        except RuntimeError as exc:
            logger.error("Error in preprocessing prompt inputs", exc_info=exc)
        logger.info("hello")
    finally:
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
            handler.close()
        for lg, handlers, propagate in saved:  # leave the process's logging as other tests expect it
            lg.handlers, lg.propagate = handlers, propagate
    text = log_file.read_text()
    assert re.search(r"^ERROR \d\d-\d\d \d\d:\d\d:\d\d \[test_server_units\.py:\d+\] Error in preprocessing",
                     text, re.M)
    assert "Traceback (most recent call last)" in text and "RuntimeError: Already borrowed" in text
    assert re.search(r"^INFO \d\d-\d\d \d\d:\d\d:\d\d \[test_server_units\.py:\d+\] hello$", text, re.M)
    assert "hello" in capsys.readouterr().out
    assert logging.getLogger(logs.LOGGER_NAME).propagate is False


@pytest.mark.parametrize(("settings", "said"), [
    ({"port": 70000}, "port must be between 0 and 65535, got 70000"),
    ({"workers": 0}, "workers must be at least 1, got 0"),
    ({"token_delay_ms": -1.0}, "token_delay_ms must be >= 0, got -1"),
    ({"max_body_mb": 0.0}, "max_body_mb must be positive, got 0"),
    ({"model": " "}, "model must not be empty"),
])
def test_server_settings_out_of_range_name_the_setting_not_a_flag(settings: dict, said: str) -> None:
    with pytest.raises(ConfigError) as caught:
        ServerConfig(**settings)
    assert str(caught.value) == said and caught.value.setting == next(iter(settings))
