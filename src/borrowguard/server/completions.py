"""The routes beside chat that vLLM serves too: /v1/completions, /detokenize and /version.

They tokenize with settings of their own (special tokens added, another truncation length), and `bad_words`
are encoded on the event loop: the request shapes that make a shared tokenizer race in vLLM, so verify's
default mix meets them on the reference server as on a real one.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from borrowguard._version import __version__
from borrowguard.server.engine import Completion
from borrowguard.server.frontend import Prompt
from borrowguard.server.protocol import APIError, ChatRequest, CompletionRequest, bad, parse_completion, sse

MAX_DETOKENIZE_IDS = 1 << 16
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def add_routes(app: FastAPI, state: Any, read_json: Callable[[Request], Awaitable[Any]],
               check_model: Callable[[str | None], None],
               failed: Callable[[Exception, str], JSONResponse]) -> None:
    frontend, engine = state.frontend, state.engine

    @app.get("/version")
    async def version() -> JSONResponse:
        return JSONResponse({"version": __version__})

    @app.post("/detokenize")
    async def detokenize(request: Request) -> Response:
        request_id = f"detokenize-{uuid.uuid4().hex}"
        try:
            body = await read_json(request)
            check_model(body.get("model") if isinstance(body, dict) else None)
            tokens = body.get("tokens") if isinstance(body, dict) else None
            if (not isinstance(tokens, list) or len(tokens) > MAX_DETOKENIZE_IDS
                    or not all(isinstance(t, int) and not isinstance(t, bool) and 0 <= t < (1 << 31) for t in tokens)):
                raise bad(f"'tokens' must be a list of at most {MAX_DETOKENIZE_IDS} token ids.", param="tokens")
            text = await frontend.run(frontend.detokenize, tokens)
        except APIError as exc:
            return JSONResponse(exc.body(), status_code=exc.status)
        except Exception as exc:  # parsing raises only APIError: this came from the tokenizer
            return failed(exc, request_id)
        return JSONResponse({"prompt": text})

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        request_id = f"cmpl-{uuid.uuid4().hex}"
        try:
            req = parse_completion(await read_json(request))
            check_model(req.model)
            if req.bad_words:
                frontend.encode_bad_words(req.bad_words)  # on the event loop, as vLLM does
            prompt = await frontend.completion_prompt(req.prompt, req.max_tokens, req.truncate_prompt_tokens)
            completion = await engine.complete(ChatRequest(model=req.model, messages=[], max_tokens=req.max_tokens))
        except APIError as exc:
            return JSONResponse(exc.body(), status_code=exc.status)
        except Exception as exc:  # parsing raises only APIError: this came from the tokenizer
            return failed(exc, request_id)
        state.metrics.prompt_tokens += len(prompt.token_ids)
        state.metrics.completion_tokens += completion.completion_tokens
        if req.stream:
            chunks = _stream(state, request_id, req, prompt, completion)
            return StreamingResponse(chunks, media_type="text/event-stream", headers=SSE_HEADERS)
        await engine.pace(completion.completion_tokens)
        return JSONResponse(_response(state.model, request_id, prompt, completion))


def _usage(prompt: Prompt, completion: Completion) -> dict[str, int]:
    n = len(prompt.token_ids)
    return {"prompt_tokens": n, "completion_tokens": completion.completion_tokens,
            "total_tokens": n + completion.completion_tokens}


def _response(model: str, request_id: str, prompt: Prompt, completion: Completion) -> dict[str, Any]:
    return {
        "id": request_id,
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "text": completion.text, "logprobs": None,
                     "finish_reason": completion.finish_reason}],
        "usage": _usage(prompt, completion),
    }


async def _stream(state: Any, request_id: str, req: CompletionRequest, prompt: Prompt,
                  completion: Completion) -> AsyncIterator[bytes]:
    created = int(time.time())

    def chunk(text: str, finish_reason: str | None = None) -> bytes:
        return sse({"id": request_id, "object": "text_completion", "created": created, "model": state.model,
                     "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}]})

    async for piece in state.engine.paced(completion):
        if piece:
            yield chunk(piece)
    yield chunk("", completion.finish_reason)
    if req.include_usage:
        yield sse({"id": request_id, "object": "text_completion", "created": created, "model": state.model,
                    "choices": [], "usage": _usage(prompt, completion)})
    yield b"data: [DONE]\n\n"
