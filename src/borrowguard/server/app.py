"""The FastAPI app: OpenAI-compatible routes over the real front end and the stub engine.

Handlers take the raw `Request` and parse it themselves (see protocol.py): the body is read with a
size limit before it is parsed, and no pydantic validation sits on the hot path.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from borrowguard._version import __version__
from borrowguard.server import logs
from borrowguard.server.completions import SSE_HEADERS, add_routes
from borrowguard.server.engine import Completion, StubEngine
from borrowguard.server.frontend import FrontEnd, Prompt
from borrowguard.server.metrics import CONTENT_TYPE, Metrics, MetricsMiddleware
from borrowguard.server.protocol import (
    APIError,
    ChatRequest,
    bad,
    error_body,
    parse_chat,
    parse_json,
    parse_tokenize,
    sse,
)

OWNED_BY = "borrowguard-stub-engine"
# Bodies above this are parsed off the event loop so one large image request does not stall the others.
_PARSE_INLINE_BYTES = 256 * 1024
T = TypeVar("T")


@dataclass
class ServerState:
    model: str
    frontend: FrontEnd
    engine: StubEngine
    metrics: Metrics
    max_body_bytes: int
    max_body_name: str = "max_body_mb"  # how the 413 names the setting (serve: its flag)


def error_response(exc: APIError) -> JSONResponse:
    return JSONResponse(exc.body(), status_code=exc.status)


def create_app(state: ServerState) -> FastAPI:
    # Long on purpose: FastAPI routes are closures over `state` and the helpers below, and one place
    # that lists every route of the server is easier to read than the same closures spread over modules
    # (the routes vLLM has beside chat live in completions.py).
    app = FastAPI(title="borrowguard reference server (stub engine)", version=__version__,
                  docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(MetricsMiddleware, metrics=state.metrics)
    logger = logs.get_logger()
    created = int(time.time())

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse(error_body(str(exc.detail), _type(exc.status_code), None, exc.status_code),
                            status_code=exc.status_code)

    @app.get("/health")
    async def health() -> Response:
        return Response(status_code=200)

    @app.get("/metrics")
    async def metrics() -> Response:
        return PlainTextResponse(state.metrics.render(), media_type=CONTENT_TYPE)

    @app.get("/v1/models")
    async def models() -> JSONResponse:
        card = {"id": state.model, "object": "model", "created": created, "owned_by": OWNED_BY,
                "root": state.model, "parent": None, "max_model_len": state.frontend.max_model_len}
        return JSONResponse({"object": "list", "data": [card]})

    async def read_json(request: Request) -> Any:
        body = await _read_body(request, state.max_body_bytes, state.max_body_name)
        if len(body) > _PARSE_INLINE_BYTES:
            return await asyncio.to_thread(parse_json, body)
        return parse_json(body)

    async def off_loop_if_tools(parse: Callable[[Any], T], body: Any) -> T:
        # jsonschema checks each tool schema the first time it is seen (about 0.2 ms per sub-schema):
        # a request with tools is parsed on a thread, so one large tool set does not stall the others.
        if isinstance(body, dict) and body.get("tools"):
            return await asyncio.to_thread(parse, body)
        return parse(body)

    def check_model(model: str | None) -> None:
        if model is not None and model != state.model:
            raise bad(f"The model `{model}` does not exist; this server serves `{state.model}`.",
                      param="model", code="model_not_found")

    def failed(exc: Exception, request_id: str) -> JSONResponse:
        # Anything but a client error here was raised by the tokenizer or processor: log it the way vLLM
        # does (message + full traceback, so `borrowguard scan` recognises it) and answer 500.
        state.metrics.record_tokenizer_error(exc)
        logger.error("Error in preprocessing prompt inputs (request %s)", request_id, exc_info=exc)
        message = f"{type(exc).__name__}: {exc}"[:1000]
        return JSONResponse(error_body(message, "InternalServerError", None, 500), status_code=500)

    @app.post("/tokenize")
    async def tokenize(request: Request) -> Response:
        request_id = f"tokenize-{uuid.uuid4().hex}"
        try:
            req = await off_loop_if_tools(parse_tokenize, await read_json(request))
            check_model(req.model)
            if req.chat is not None:
                tokens = (await state.frontend.chat_prompt(req.chat)).token_ids
            else:
                state.frontend.check_prompt_chars(len(req.prompt or ""))
                tokens = await state.frontend.run(state.frontend.encode_text, req.prompt or "",
                                                  req.add_special_tokens)
        except APIError as exc:
            return error_response(exc)
        except Exception as exc:  # parsing raises only APIError: this came from the tokenizer
            return failed(exc, request_id)
        return JSONResponse({"count": len(tokens), "max_model_len": state.frontend.max_model_len,
                             "tokens": tokens, "token_strs": None})

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        request_id = f"chatcmpl-{uuid.uuid4().hex}"
        try:
            chat = await off_loop_if_tools(parse_chat, await read_json(request))
            check_model(chat.model)
            if chat.bad_words:
                state.frontend.encode_bad_words(chat.bad_words)  # on the event loop, as vLLM does
            prompt = await state.frontend.chat_prompt(chat)
            completion = await state.engine.complete(chat)
        except APIError as exc:
            return error_response(exc)
        except Exception as exc:  # parsing raises only APIError: this came from the tokenizer
            return failed(exc, request_id)
        state.metrics.prompt_tokens += len(prompt.token_ids)
        state.metrics.completion_tokens += completion.completion_tokens
        if chat.stream:
            chunks = _stream(state, request_id, chat, prompt, completion)
            return StreamingResponse(chunks, media_type="text/event-stream", headers=SSE_HEADERS)
        await state.engine.pace(completion.completion_tokens)
        return JSONResponse(_response(state.model, request_id, prompt, completion))

    add_routes(app, state, read_json, check_model, failed)
    return app


def _type(status: int) -> str:
    return APIError(status, "").type


async def _read_body(request: Request, limit: int, setting: str = "max_body_mb") -> bytes:
    too_large = APIError(413, f"Request body exceeds the limit of {limit} bytes ({setting}).",
                         code="request_too_large")
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise bad("Invalid Content-Length header.")
        if int(declared) > limit:
            raise too_large
    chunks: list[bytes] = []
    size = 0
    try:
        # Chunked bodies carry no length: count what arrives and stop as soon as it is over the limit.
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise too_large
            chunks.append(chunk)
    except ClientDisconnect:
        raise bad("The client disconnected before sending the whole body.") from None
    return b"".join(chunks)


def _usage(prompt: Prompt, completion: Completion) -> dict[str, int]:
    prompt_tokens = len(prompt.token_ids)
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion.completion_tokens,
            "total_tokens": prompt_tokens + completion.completion_tokens}


def _tool_calls(completion: Completion) -> list[dict[str, Any]]:
    return [{"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
            for call in completion.tool_calls]


def _response(model: str, request_id: str, prompt: Prompt, completion: Completion) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": completion.text}
    if completion.tool_calls:
        message["content"] = None  # as OpenAI sends a pure tool call
        message["tool_calls"] = _tool_calls(completion)
    return {
        "id": request_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": completion.finish_reason}
        ],
        "usage": _usage(prompt, completion),
    }


async def _stream(state: ServerState, request_id: str, chat: ChatRequest, prompt: Prompt,
                  completion: Completion) -> AsyncIterator[bytes]:
    """Server-sent events as OpenAI sends them: role first, then deltas, then the finish reason, then
    (with stream_options.include_usage) a usage chunk with no choices, then [DONE]."""
    created = int(time.time())

    def event(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        chunk: dict[str, Any] = {
            "id": request_id, "object": "chat.completion.chunk", "created": created, "model": state.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
        }
        if chat.include_usage:
            chunk["usage"] = None
        return sse(chunk)

    yield event({"role": "assistant", "content": ""})
    if completion.tool_calls:
        call = completion.tool_calls[0]
        yield event({"tool_calls": [{"index": 0, "id": call.id, "type": "function",
                                     "function": {"name": call.name, "arguments": ""}}]})
        async for piece in state.engine.paced(completion):
            if piece:
                yield event({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
    else:
        async for piece in state.engine.paced(completion):
            if piece:  # a token that completes no character yet sends nothing, as vLLM does
                yield event({"content": piece})
    yield event({}, completion.finish_reason)
    if chat.include_usage:
        yield sse({"id": request_id, "object": "chat.completion.chunk", "created": created,
                    "model": state.model, "choices": [], "usage": _usage(prompt, completion)})
    yield b"data: [DONE]\n\n"
