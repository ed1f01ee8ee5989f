"""A tiny ASGI app serving the bundled ChatML tokenizer, for `borrowguard run -- uvicorn` tests.

    GET /health         {"pid", "guarded"}
    GET /call/{i}       runs workload call i on the shared tokenizer (threadpool): {"pid", "digest"}
    GET /race?seconds=  hammers the shared tokenizer in this worker, blocking its event loop on purpose
                        so that concurrent requests spread over the workers: {"pid", "guarded", ...}

The workload is `make_calls(tok, random.Random(SEED), N_CALLS)`, so a client can compute the same calls
and their serial digests itself. /race compares with the serial reference computed unguarded at start-up
(unguarded.py), never through the guard this worker may run under.
"""

from __future__ import annotations

import hashlib
import os
import random

from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route
from transformers import AutoTokenizer
from unguarded import serial_unguarded

import borrowguard
from borrowguard.data import tokenizer_path
from borrowguard.race import hammer, make_calls, normalise

SEED = 0
N_CALLS = 120


def _load():
    return AutoTokenizer.from_pretrained(str(tokenizer_path()))


tok = _load()
calls = make_calls(tok, random.Random(SEED), N_CALLS)
REFERENCE = serial_unguarded(_load, calls)


def digest(value: object) -> str:
    return hashlib.sha1(repr(value).encode()).hexdigest()


def _guarded() -> bool:
    try:
        return borrowguard.is_installed()
    except AttributeError:
        return False


def health(request):
    return JSONResponse({"pid": os.getpid(), "guarded": _guarded()})


def call(request):  # sync: Starlette runs it in its threadpool, so requests share `tok` across threads
    i = int(request.path_params["i"]) % N_CALLS
    try:
        result = normalise(calls[i].run(tok))
    except Exception as exc:
        result = normalise(exc)
    return JSONResponse({"pid": os.getpid(), "digest": digest(result)})


async def race(request):
    seconds = min(float(request.query_params.get("seconds", "1")), 5.0)
    result = hammer(tok, calls, REFERENCE, threads=8, seconds=seconds)
    return JSONResponse({"pid": os.getpid(), "guarded": _guarded(), **result.to_dict()})


app = Starlette(routes=[Route("/health", health), Route("/call/{i:int}", call), Route("/race", race)])
