"""A FastAPI embedding + rerank server written the way real ones are: the pattern most reports of the race
come from (sentence-transformers / transformers apps, haystack, weaviate's transformers module).

    python -m uvicorn embed_app:app --app-dir tests/support --host 127.0.0.1 --port 8000
    borrowguard run -- python -m uvicorn embed_app:app --app-dir tests/support ...   # guarded

Real parts, nothing downloaded: the bundled bert-wordpiece fast tokenizer (transformers' AutoTokenizer) and
a tiny BertModel built here from a config with a fixed seed (torch on the CPU). Every endpoint is a sync
`def`, so FastAPI runs it in its thread pool and concurrent requests share the one tokenizer across
threads, each with its own truncation/padding (a batch pads to its longest text, a single text does not;
`truncate_prompt_tokens` sets the request's max_length) — what makes the old stack raise "Already
borrowed" and the newest one apply one request's settings to another's call.

    GET  /health, /v1/models                  (the model card carries max_model_len, as vLLM's does)
    POST /v1/embeddings  {"input": str | [str] | [int] | [[int]], "truncate_prompt_tokens"?: int (-1: max)}
         -> {"data": [{"object": "embedding", "index", "embedding"}], "usage": {"prompt_tokens", ...}}
    POST /v1/rerank, /rerank  {"query", "documents": [str], "top_n"?, "truncate_prompt_tokens"?}
         -> {"results": [{"index", "relevance_score", "document": {"text"}}], "usage": {...}}
    POST /score  {"text_1": str | [str], "text_2": str | [str]}  -> {"data": [{"index", "score"}], "usage"}

Query/document pairs go through the tokenizer's pair path. A failing call is logged with its traceback
(uvicorn's stderr: the server log) and answered 500 with the exception in an OpenAI-style error body.
`usage.prompt_tokens` counts the real (unpadded) tokens of the request.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import torch
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from transformers import AutoTokenizer, BertConfig, BertModel

from borrowguard.data import WORDPIECE, tokenizer_path

MODEL_NAME = "tiny-bert-embed"
SEED = 20261201
MAX_LENGTH = 512  # the tokenizer's model_max_length and the model's positions
MAX_INPUTS = 256
MAX_TEXT_CHARS = 64 << 10

log = logging.getLogger("embed_app")
torch.set_num_threads(1)  # 2-core machines; concurrency comes from FastAPI's threads
torch.manual_seed(SEED)
tok = AutoTokenizer.from_pretrained(str(tokenizer_path(WORDPIECE)))
config = BertConfig(vocab_size=len(tok), hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=128, max_position_embeddings=MAX_LENGTH, pad_token_id=tok.pad_token_id)
model = BertModel(config).eval()
score_head = torch.nn.Linear(config.hidden_size, 1).eval()
app = FastAPI(title="borrowguard test embedding server")


class BadRequest(ValueError):
    """The client's request is malformed: a 400, never the server's fault."""


@app.exception_handler(BadRequest)
async def _bad_request(request: Request, exc: BadRequest) -> JSONResponse:
    return JSONResponse({"error": {"message": str(exc), "type": "BadRequestError", "code": 400}}, 400)


@app.exception_handler(Exception)
async def _server_error(request: Request, exc: Exception) -> JSONResponse:
    log.error("request %s failed", request.url.path, exc_info=exc)
    return JSONResponse(
        {"error": {"message": f"{type(exc).__name__}: {exc}", "type": "InternalServerError", "code": 500}}, 500
    )


def _guarded() -> bool:
    try:
        import borrowguard

        return borrowguard.is_installed()
    except (ImportError, AttributeError):
        return False


@app.get("/health")
def health() -> dict[str, Any]:
    return {"status": "ok", "pid": os.getpid(), "guarded": _guarded()}


@app.get("/v1/models")
def models() -> dict[str, Any]:
    card = {"id": MODEL_NAME, "object": "model", "owned_by": "borrowguard-embed-test", "max_model_len": MAX_LENGTH}
    return {"object": "list", "data": [card]}


def _max_length(body: dict[str, Any]) -> int:
    value = body.get("truncate_prompt_tokens")
    if value is None or value == -1:  # -1: the model's maximum (as in vLLM)
        return MAX_LENGTH
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_LENGTH:
        raise BadRequest(f"truncate_prompt_tokens must be an integer in 1..{MAX_LENGTH}")
    return value


def _texts(value: Any, name: str) -> list[str]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or len(items) > MAX_INPUTS:
        raise BadRequest(f"`{name}` must be a string or a list of 1..{MAX_INPUTS} strings")
    if not all(isinstance(t, str) and 0 < len(t) <= MAX_TEXT_CHARS for t in items):
        raise BadRequest(f"every `{name}` item must be a non-empty string of at most {MAX_TEXT_CHARS} chars")
    return items


def _token_ids(value: Any) -> list[list[int]] | None:
    """[int] or [[int]] (OpenAI's token-id input), else None (text input)."""
    if not isinstance(value, list) or not value:
        return None
    rows = [value] if all(isinstance(v, int) and not isinstance(v, bool) for v in value) else value
    if not all(isinstance(r, list) and r and all(isinstance(v, int) and not isinstance(v, bool) for v in r)
               for r in rows):
        return None
    if len(rows) > MAX_INPUTS or any(not 0 <= v < len(tok) for r in rows for v in r):
        raise BadRequest(f"token ids must lie in 0..{len(tok) - 1}, at most {MAX_INPUTS} inputs")
    return rows


def _pad(rows: list[list[int]]) -> dict[str, torch.Tensor]:
    longest = max(len(r) for r in rows)
    ids = torch.full((len(rows), longest), tok.pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(rows), longest), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
        mask[i, : len(r)] = 1
    return {"input_ids": ids, "attention_mask": mask}


def _encode(texts: list[str], pairs: list[str] | None, max_length: int) -> dict[str, torch.Tensor]:
    # As real apps do: a batch pads to its longest member, a single text is not padded; every request
    # truncates to its own max_length. The shared tokenizer's settings change from call to call.
    return tok(texts, pairs, padding=len(texts) > 1, truncation=True, max_length=max_length,
               return_tensors="pt")


def _pooled(batch: dict[str, torch.Tensor]) -> torch.Tensor:
    with torch.inference_mode():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)
    return torch.nn.functional.normalize(mean, dim=-1)


def _usage(batch: dict[str, torch.Tensor]) -> dict[str, int]:
    n = int(batch["attention_mask"].sum())
    return {"prompt_tokens": n, "total_tokens": n}


def _body(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise BadRequest("the body must be a JSON object")
    return raw


@app.post("/v1/embeddings")
def embeddings(raw: dict[str, Any]) -> dict[str, Any]:
    body = _body(raw)
    max_length = _max_length(body)
    rows = _token_ids(body.get("input"))
    if rows is not None:  # token ids skip the tokenizer (as in vLLM): truncated here, keeping the end
        batch = _pad([r[-max_length:] for r in rows])
    else:
        batch = _encode(_texts(body.get("input"), "input"), None, max_length)
    vectors = _pooled(batch)
    data = [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)]
    return {"object": "list", "model": MODEL_NAME, "data": data, "usage": _usage(batch)}


def _scores(queries: list[str], documents: list[str], max_length: int) -> tuple[list[float], dict]:
    batch = _encode(queries, documents, max_length)
    with torch.inference_mode():
        cls = model(**batch).last_hidden_state[:, 0]
        scores = torch.sigmoid(score_head(cls)).squeeze(-1)
    return [float(s) for s in scores], _usage(batch)


@app.post("/v1/rerank")
@app.post("/rerank")
def rerank(raw: dict[str, Any]) -> dict[str, Any]:
    body = _body(raw)
    query = body.get("query")
    if not isinstance(query, str) or not query or len(query) > MAX_TEXT_CHARS:
        raise BadRequest("`query` must be a non-empty string")
    documents = _texts(body.get("documents"), "documents")
    scores, usage = _scores([query] * len(documents), documents, _max_length(body))
    top_n = body.get("top_n")
    order = sorted(range(len(documents)), key=lambda i: -scores[i])
    if isinstance(top_n, int) and not isinstance(top_n, bool) and top_n > 0:
        order = order[:top_n]
    results = [{"index": i, "relevance_score": scores[i], "document": {"text": documents[i]}} for i in order]
    return {"model": MODEL_NAME, "results": results, "usage": usage}


@app.post("/score")
def score(raw: dict[str, Any]) -> dict[str, Any]:
    body = _body(raw)
    first, second = _texts(body.get("text_1"), "text_1"), _texts(body.get("text_2"), "text_2")
    if len(first) == 1:
        first = first * len(second)
    if len(first) != len(second):
        raise BadRequest("`text_1` must be one string or as many as `text_2`")
    scores, usage = _scores(first, second, _max_length(body))
    data = [{"object": "score", "index": i, "score": s} for i, s in enumerate(scores)]
    return {"object": "list", "model": MODEL_NAME, "data": data, "usage": usage}
