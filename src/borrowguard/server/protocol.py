"""The OpenAI / vLLM request shapes the server accepts, parsed from untrusted JSON into typed objects.

Parsing is by hand rather than with pydantic models: it keeps the per-request cost low (the server must
sustain well over 100 small chats per second on two cores) and every message says exactly which field
is wrong. Anything we do not use (temperature, top_p...) is accepted and ignored, as vLLM does.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from borrowguard.server.tools import ToolSchemaError, schema_size, validate_parameters

ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
# A chat has at most this many messages / parts / tools: enough for real agents, bounded for hostile input.
MAX_MESSAGES = 4096
MAX_PARTS = 1024
MAX_TOOLS = 512
# Sub-schemas over all tools of one request: jsonschema checks each new one in about 0.2 ms, so this
# keeps a request's worst case near a second of CPU. Real tool sets have a few hundred.
MAX_TOOL_SUBSCHEMAS = 5000


class APIError(Exception):
    """An error answered to the client with an OpenAI-style body; 4xx are the client's fault."""

    def __init__(self, status: int, message: str, *, type: str | None = None, param: str | None = None,
                 code: str | int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type or _DEFAULT_TYPES.get(status, "BadRequestError")
        self.param = param
        self.code = status if code is None else code

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.type, self.param, self.code)


_DEFAULT_TYPES = {
    400: "BadRequestError",
    404: "NotFoundError",
    405: "MethodNotAllowedError",
    413: "RequestTooLargeError",
    500: "InternalServerError",
}


def error_body(message: str, type: str, param: str | None, code: str | int | None) -> dict[str, Any]:
    """The body OpenAI and vLLM send with an error status."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def bad(message: str, param: str | None = None, code: str | int | None = None) -> APIError:
    return APIError(400, message, param=param, code=code)


def parse_json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except RecursionError:  # deeply nested arrays are valid JSON but exhaust the parser's stack
        raise bad("Invalid JSON body: nested too deeply.", code="invalid_json") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise bad(f"Invalid JSON body: {exc}", code="invalid_json") from None


@dataclass(frozen=True)
class Tool:
    name: str
    description: str | None
    parameters: dict[str, Any]
    raw: dict[str, Any]  # passed unchanged to the chat template, as vLLM does


@dataclass(frozen=True)
class ToolChoice:
    mode: str  # "auto" | "none" | "required" | "named"
    name: str | None = None


@dataclass
class ChatRequest:
    model: str | None
    messages: list[dict[str, Any]]
    tools: list[Tool] = field(default_factory=list)
    tool_choice: ToolChoice = field(default_factory=lambda: ToolChoice("none"))
    stream: bool = False
    include_usage: bool = False
    max_tokens: int | None = None
    truncate_prompt_tokens: int | None = None
    image_urls: list[str] = field(default_factory=list)  # in prompt order
    text_chars: int = 0  # characters of message text, for the cheap size check before rendering
    bad_words: list[str] = field(default_factory=list)

    @property
    def tool_dicts(self) -> list[dict[str, Any]] | None:
        return [tool.raw for tool in self.tools] or None


@dataclass
class CompletionRequest:
    """POST /v1/completions: one text prompt (vLLM also takes token ids and lists; the stub does not)."""

    model: str | None
    prompt: str
    max_tokens: int = 16  # vLLM's default for completions
    truncate_prompt_tokens: int | None = None
    bad_words: list[str] = field(default_factory=list)
    stream: bool = False
    include_usage: bool = False


@dataclass
class TokenizeRequest:
    model: str | None
    prompt: str | None = None
    add_special_tokens: bool = True
    chat: ChatRequest | None = None  # when the request carries messages


def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise bad(f"{what} must be a JSON object.", param=what)
    return value


def _optional_int(body: dict[str, Any], name: str, minimum: int) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise bad(f"'{name}' must be an integer >= {minimum}, got {value!r}.", param=name)
    return value


def _model(body: dict[str, Any]) -> str | None:
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise bad("'model' must be a string.", param="model")
    return model


MAX_BAD_WORDS = 64
MAX_BAD_WORD_CHARS = 256


def _bad_words(body: dict[str, Any]) -> list[str]:
    value = body.get("bad_words")
    if value is None:
        return []
    if (not isinstance(value, list) or len(value) > MAX_BAD_WORDS
            or not all(isinstance(w, str) and 0 < len(w) <= MAX_BAD_WORD_CHARS for w in value)):
        raise bad(f"'bad_words' must be a list of at most {MAX_BAD_WORDS} non-empty strings of at most "
                  f"{MAX_BAD_WORD_CHARS} characters.", param="bad_words")
    return value


def _stream_options(body: dict[str, Any]) -> tuple[bool, bool]:
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise bad("'stream' must be a boolean.", param="stream")
    stream_options = body.get("stream_options")
    include_usage = False
    if stream_options is not None:
        if not stream:
            raise bad("'stream_options' is only allowed when 'stream' is true.", param="stream_options")
        include_usage = _object(stream_options, "stream_options").get("include_usage", False) is True
    return stream, include_usage


def _truncate_prompt_tokens(body: dict[str, Any]) -> int | None:
    value = body.get("truncate_prompt_tokens")
    if value is None:
        return None
    # vLLM: a positive limit, or -1 for "the model's maximum length".
    if isinstance(value, bool) or not isinstance(value, int) or (value < 1 and value != -1):
        raise bad(f"'truncate_prompt_tokens' must be a positive integer or -1, got {value!r}.",
                  param="truncate_prompt_tokens")
    return value


def _image_url(part: dict[str, Any], where: str) -> str:
    image_url = part.get("image_url")
    url = image_url.get("url") if isinstance(image_url, dict) else image_url
    if not isinstance(url, str) or not url:
        raise bad(f"{where}: an image_url part needs image_url.url (a data: URL).", param="messages")
    return url


def _messages(value: Any, image_urls: list[str], text_chars: list[int]) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not value:
        raise bad("'messages' must be a non-empty array.", param="messages")
    if len(value) > MAX_MESSAGES:
        raise bad(f"Too many messages ({len(value)} > {MAX_MESSAGES}).", param="messages")
    messages = []
    for i, message in enumerate(value):
        where = f"messages[{i}]"
        message = _object(message, where)
        role = message.get("role")
        if role not in ROLES:
            raise bad(f"{where}.role must be one of {', '.join(sorted(ROLES))}, got {role!r}.",
                      param="messages")
        content = message.get("content")
        if isinstance(content, list):
            if len(content) > MAX_PARTS:
                raise bad(f"{where}: too many content parts.", param="messages")
            for j, part in enumerate(content):
                part = _object(part, f"{where}.content[{j}]")
                kind = part.get("type")
                if kind == "text":
                    if not isinstance(part.get("text"), str):
                        raise bad(f"{where}.content[{j}].text must be a string.", param="messages")
                    text_chars[0] += len(part["text"])
                elif kind == "image_url":
                    image_urls.append(_image_url(part, f"{where}.content[{j}]"))
                else:
                    raise bad(f"{where}.content[{j}].type {kind!r} is not supported (text, image_url).",
                              param="messages")
        elif content is None:
            if role != "assistant":
                raise bad(f"{where}.content is required for role {role!r}.", param="messages")
        elif not isinstance(content, str):
            raise bad(f"{where}.content must be a string or an array of parts.", param="messages")
        else:
            text_chars[0] += len(content)
        if role == "assistant" and message.get("tool_calls") is not None:
            _check_tool_calls(message["tool_calls"], where)
        messages.append(message)
    return messages


def _check_tool_calls(calls: Any, where: str) -> None:
    # The template concatenates these into the prompt: wrong types would fail deep inside Jinja.
    if not isinstance(calls, list):
        raise bad(f"{where}.tool_calls must be an array.", param="messages")
    for i, call in enumerate(calls):
        call = _object(call, f"{where}.tool_calls[{i}]")
        function = _object(call.get("function"), f"{where}.tool_calls[{i}].function")
        if not isinstance(function.get("name"), str):
            raise bad(f"{where}.tool_calls[{i}].function.name must be a string.", param="messages")
        if not isinstance(function.get("arguments"), (str, dict)):
            raise bad(f"{where}.tool_calls[{i}].function.arguments must be a JSON string.", param="messages")


def _tools(value: Any) -> list[Tool]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise bad("'tools' must be an array.", param="tools")
    if len(value) > MAX_TOOLS:
        raise bad(f"Too many tools ({len(value)} > {MAX_TOOLS}).", param="tools")
    _check_total_size(value)
    tools: list[Tool] = []
    seen: set[str] = set()
    for i, raw in enumerate(value):
        where = f"tools[{i}]"
        raw = _object(raw, where)
        if raw.get("type", "function") != "function":
            raise bad(f"{where}.type must be 'function'.", param="tools")
        function = _object(raw.get("function"), f"{where}.function")
        name = function.get("name")
        if not isinstance(name, str) or not _TOOL_NAME.match(name):
            raise bad(f"{where}.function.name must match [A-Za-z0-9_.-]{{1,64}}, got {name!r}.",
                      param="tools")
        if name in seen:
            raise bad(f"{where}: duplicate tool name {name!r}.", param="tools")
        seen.add(name)
        description = function.get("description")
        if description is not None and not isinstance(description, str):
            raise bad(f"{where}.function.description must be a string.", param="tools")
        parameters = function.get("parameters")
        if parameters is None:
            parameters = {"type": "object", "properties": {}}
        try:
            validate_parameters(parameters)
        except ToolSchemaError as exc:
            raise bad(f"{where}.function.parameters is not a valid JSON schema: {exc}", param="tools",
                      code="invalid_tool_schema") from None
        tools.append(Tool(name, description, parameters, raw))
    return tools


def _check_total_size(tools: list[Any]) -> None:
    total = 0
    for i, raw in enumerate(tools):
        function = raw.get("function") if isinstance(raw, dict) else None
        parameters = function.get("parameters") if isinstance(function, dict) else None
        try:
            total += schema_size(parameters)
        except ToolSchemaError as exc:
            raise bad(f"tools[{i}].function.parameters is not a valid JSON schema: {exc}", param="tools",
                      code="invalid_tool_schema") from None
        if total > MAX_TOOL_SUBSCHEMAS:
            raise bad(f"The tools' parameter schemas hold more than {MAX_TOOL_SUBSCHEMAS} sub-schemas in all.",
                      param="tools", code="invalid_tool_schema")


def _tool_choice(value: Any, tools: list[Tool]) -> ToolChoice:
    if value is None:
        return ToolChoice("auto" if tools else "none")
    if value in ("auto", "none", "required"):
        choice = ToolChoice(value)
    elif isinstance(value, dict):
        function = value.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        if value.get("type") != "function" or not isinstance(name, str):
            raise bad("'tool_choice' object must be {\"type\": \"function\", \"function\": {\"name\": ...}}.",
                      param="tool_choice")
        if name not in {tool.name for tool in tools}:
            raise bad(f"'tool_choice' names {name!r}, which is not among the request's tools.",
                      param="tool_choice")
        choice = ToolChoice("named", name)
    else:
        raise bad(f"'tool_choice' must be 'auto', 'none', 'required' or a named function, got {value!r}.",
                  param="tool_choice")
    if choice.mode in ("required", "auto") and value is not None and not tools:
        raise bad(f"tool_choice {choice.mode!r} requires 'tools'.", param="tool_choice")
    return choice


def parse_chat(body: Any) -> ChatRequest:
    body = _object(body, "The request body")
    image_urls: list[str] = []
    text_chars = [0]
    messages = _messages(body.get("messages"), image_urls, text_chars)
    tools = _tools(body.get("tools"))
    stream, include_usage = _stream_options(body)
    n = body.get("n", 1)
    if n != 1:
        raise bad("The stub engine supports only n=1.", param="n")
    max_tokens = _optional_int(body, "max_completion_tokens", 1)
    if max_tokens is None:
        max_tokens = _optional_int(body, "max_tokens", 1)
    return ChatRequest(
        model=_model(body),
        messages=messages,
        tools=tools,
        tool_choice=_tool_choice(body.get("tool_choice"), tools),
        stream=stream,
        include_usage=include_usage,
        max_tokens=max_tokens,
        truncate_prompt_tokens=_truncate_prompt_tokens(body),
        image_urls=image_urls,
        text_chars=text_chars[0],
        bad_words=_bad_words(body),
    )


def parse_completion(body: Any) -> CompletionRequest:
    body = _object(body, "The request body")
    prompt = body.get("prompt")
    if not isinstance(prompt, str):
        raise bad("The stub engine takes 'prompt' as one string.", param="prompt")
    if body.get("n", 1) != 1:
        raise bad("The stub engine supports only n=1.", param="n")
    max_tokens = _optional_int(body, "max_tokens", 1)
    stream, include_usage = _stream_options(body)
    return CompletionRequest(
        model=_model(body),
        prompt=prompt,
        max_tokens=16 if max_tokens is None else max_tokens,
        truncate_prompt_tokens=_truncate_prompt_tokens(body),
        bad_words=_bad_words(body),
        stream=stream,
        include_usage=include_usage,
    )


def parse_tokenize(body: Any) -> TokenizeRequest:
    body = _object(body, "The request body")
    model = _model(body)
    if "messages" in body:
        return TokenizeRequest(model=model, chat=parse_chat({k: body[k] for k in ("messages", "tools")
                                                             if k in body}))
    prompt = body.get("prompt")
    if not isinstance(prompt, str):
        raise bad("/tokenize needs 'prompt' (a string) or 'messages'.", param="prompt")
    add_special_tokens = body.get("add_special_tokens", True)
    if not isinstance(add_special_tokens, bool):
        raise bad("'add_special_tokens' must be a boolean.", param="add_special_tokens")
    return TokenizeRequest(model=model, prompt=prompt, add_special_tokens=add_special_tokens)


def sse(payload: dict[str, Any]) -> bytes:
    """One server-sent event carrying `payload` as JSON, as OpenAI-compatible servers send them."""
    return b"data: " + json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"
