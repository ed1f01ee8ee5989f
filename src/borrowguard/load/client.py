"""The asyncio HTTP client: one pooled aiohttp session, every failure turned into a recorded outcome.

Whatever the server does — garbage or cut SSE, stalls, resets, HTML error pages, refused connections,
redirects — `ChatClient.send` returns an `Outcome` and never raises (except on cancellation). A redirect is
never followed: requests (prompts, the API key) go to the target and nowhere else. Text from the server is
masked (the API key) before it is cut, so no part of a key survives in a message.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import asdict, dataclass
from typing import Any

import aiohttp

from borrowguard._text import clip, mask
from borrowguard.load.faults import Fault, MismatchKind, blame
from borrowguard.load.scenarios import POOLING_ENDPOINTS, BuiltRequest, Endpoint
from borrowguard.load.sse import SSEError, SSEParser

MAX_BODY = 16 << 20  # a non-streamed answer larger than this is a broken server, not a chat completion
MAX_ERROR_BODY = 64 << 10
MAX_MESSAGE = 300
TEMPLATE_ALLOWANCE = 4096  # tokens a chat template may add to a /tokenize body beyond one per byte sent
MAX_VECTOR_FLOATS = 1 << 16  # numbers kept from one repeat's pooling answer, for the vector comparison
_EXCERPT = 130  # a quoted piece of a malformed answer

# Error kinds (the status label of a request that got no usable HTTP answer)
TIMEOUT, REFUSED, CONNECT, RESET, BAD_SSE, CUT_STREAM, BAD_JSON, STREAM_ERROR, CLIENT = (
    "timeout", "refused", "connect-error", "reset", "bad-sse", "stream-cut", "bad-json", "stream-error",
    "client-error",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Outcome:
    """What happened to one request: a value, made once when the request is done (`ChatClient.send`).
    Times are seconds; `start` is relative to the run's start. `LoadMetrics.finished` hands back a
    replaced copy when it breaks a tie over the fault; nothing writes into one.
    """

    scenario: str
    repeat_key: str | None
    truncate: int | None
    start: float
    latency: float = 0.0
    ttft: float | None = None
    status: int | None = None
    error: str | None = None  # one of the kinds above; None when the answer was usable
    message: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    endpoint: str = "/v1/chat/completions"
    scale: float = 1.0  # the ContextFit scale the request was built at
    retried: bool = False  # sent again once: its first connection had been closed by the server
    fault: Fault | None = None  # for a failed request: whose fault (see load.faults)
    mismatch: MismatchKind | None = None  # for a workload fault: which mismatch
    bad_words: bool = False  # the request asked for vLLM's bad_words (encoded on another path)
    # A repeat's pooling answer, per input in input order: its embedding (or score, probabilities). Compared
    # within a tolerance (load.metrics) with the serial reference; never written to the records.
    vectors: tuple[tuple[float, ...], ...] | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.status is not None and 200 <= self.status < 300

    @property
    def label(self) -> str:
        """The status breakdown key: "200", "500", or an error kind such as "timeout"."""
        if self.status is not None and not (200 <= self.status < 300):
            return str(self.status)
        if self.error is not None:
            return self.error
        return str(self.status)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("vectors")
        data["ok"] = self.ok
        return data


@dataclass(slots=True)
class _Answer:
    """What one request's answer says, filled in while it arrives (by `ChatClient.send` and its readers
    only); `send` makes the Outcome of it once, at the end."""

    status: int | None = None
    error: str | None = None
    message: str | None = None
    ttft: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    vectors: tuple[tuple[float, ...], ...] | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.status is not None and 200 <= self.status < 300


class ChatClient:
    """POSTs chat completions to `base_url` over a pooled connection set of size `concurrency`."""

    def __init__(
        self, base_url: str, *, concurrency: int, timeout: float, api_key: str | None = None,
        auth: aiohttp.BasicAuth | None = None, served: frozenset[str] = frozenset(),
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._secrets = (api_key,) if api_key else ()
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._concurrency = concurrency
        self._auth = auth
        self.served = served  # the paths the preflight saw answer (load.faults.blame)
        self._session: aiohttp.ClientSession | None = None
        self.t0 = time.perf_counter()  # an outcome's `start` counts from here unless its sender gives its own

    async def __aenter__(self) -> ChatClient:
        connector = aiohttp.TCPConnector(limit=self._concurrency + 4, limit_per_host=0, ttl_dns_cache=300)
        # Per-request timeouts are applied by `send`; the session itself never gives up on its own.
        reuse = aiohttp.TraceConfig()
        reuse.on_connection_reuseconn.append(_mark_reused)
        self._session = aiohttp.ClientSession(
            connector=connector, timeout=aiohttp.ClientTimeout(total=None), headers=self._headers,
            trace_configs=[reuse], auth=self._auth,
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("ChatClient used outside `async with`")
        return self._session

    async def send(self, request: BuiltRequest, since: float | None = None) -> Outcome:
        """The answer to `request`, as a frozen Outcome; its `start` is seconds after `since` (a
        time.perf_counter() value: a level's start), or after the client was made."""
        plan = request.plan
        started = time.perf_counter()
        out = _Answer()
        connection: dict[str, bool] = {}
        retried = await self._attempt(request, out, started, self.timeout, connection, retried=False)
        if retried:
            # A server that closes a keep-alive connection after an error answer (vLLM does, after each
            # exception) makes the next request written on it fail before any byte of answer: that request
            # never reached the server. Send it once more, on a fresh connection, as HTTP clients do.
            out.error = out.message = None
            remaining = self.timeout - (time.perf_counter() - started)
            await self._attempt(request, out, started, remaining, {}, retried=True)
        latency = time.perf_counter() - started
        fault = mismatch = None
        if not out.ok:
            verdict = blame(out.status, out.message, plan.scenario, scale=request.scale,
                            served=request.path in self.served)
            fault, mismatch = verdict.fault, verdict.mismatch
        return Outcome(
            plan.scenario, plan.repeat_key, plan.truncate, start=started - (self.t0 if since is None else since), latency=latency, ttft=out.ttft,
            status=out.status, error=out.error, message=out.message, prompt_tokens=out.prompt_tokens,
            completion_tokens=out.completion_tokens, endpoint=request.path, scale=request.scale, retried=retried,
            fault=fault, mismatch=mismatch, bad_words=plan.bad_words, vectors=out.vectors,
        )

    async def _attempt(
        self, request: BuiltRequest, out: _Answer, started: float, timeout: float, connection: dict[str, bool],
        *, retried: bool,
    ) -> bool:
        """One try (`retried`: the second); True when the first failed on a reused connection the server had
        already closed, before any answer (worth one retry: the request never reached the server)."""
        try:
            await asyncio.wait_for(self._exchange(request, out, started, connection), max(0.001, timeout))
        except asyncio.TimeoutError:
            out.error, out.message = TIMEOUT, f"no complete answer within {self.timeout:g}s"
        except aiohttp.ClientConnectorError as exc:
            refused = isinstance(exc.os_error, ConnectionRefusedError)
            out.error, out.message = (REFUSED if refused else CONNECT), self._clean(str(exc))
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
            out.error, out.message = RESET, self._clean(f"{type(exc).__name__}: {exc}")
            return out.status is None and not retried and connection.get("reused", False)
        except aiohttp.ClientPayloadError as exc:
            out.error, out.message = RESET, self._clean(f"{type(exc).__name__}: {exc}")
        except (aiohttp.ClientError, ValueError, UnicodeError) as exc:
            out.error, out.message = CLIENT, self._clean(f"{type(exc).__name__}: {exc}")
        return False

    async def _exchange(
        self, request: BuiltRequest, out: _Answer, started: float, connection: dict[str, bool]
    ) -> None:
        async with self.session.post(
            self.base_url + request.path, data=request.body, trace_request_ctx=connection, allow_redirects=False
        ) as resp:
            out.status = resp.status
            if 300 <= resp.status < 400:
                out.message = self._clean(redirect_message(resp.status, resp.headers.get("Location")))
                return
            if not 200 <= resp.status < 300:
                out.message = self._clean(error_message(await _read_bounded(resp, MAX_ERROR_BODY)))
                return
            if request.plan.endpoint in (Endpoint.TOKENIZE, Endpoint.DETOKENIZE):
                self._read_tokenize(await _read_bounded(resp, MAX_BODY), out, len(request.body))
                return
            if request.plan.endpoint in POOLING_ENDPOINTS:
                self._read_pooling(await _read_bounded(resp, MAX_BODY), out, request.plan.repeat_key is not None)
                return
            # A streamed request may still get a plain JSON answer (some servers do that for errors).
            if _is_event_stream(resp) or (request.stream and resp.content_type != "application/json"):
                await self._read_stream(resp, out, started)
            else:
                self._read_completion(await _read_bounded(resp, MAX_BODY), out)

    async def _read_stream(self, resp: aiohttp.ClientResponse, out: _Answer, started: float) -> None:
        parser = SSEParser()
        done = False
        try:
            async for chunk in resp.content.iter_any():
                for event in parser.feed(chunk):
                    done = self._on_event(event.data, out, started) or done
                if out.error is not None:
                    return
            unfinished = parser.close()  # an event the server did not end with a blank line is dropped
        except SSEError as exc:
            out.error, out.message = BAD_SSE, str(exc)
            return
        except aiohttp.ClientPayloadError as exc:  # the connection ended inside the chunked body
            out.error, out.message = CUT_STREAM, self._clean(f"the stream broke off: {exc}")
            return
        if out.error is None and not done:
            out.error, out.message = CUT_STREAM, "the stream ended without `data: [DONE]`" + (
                " (its last event was not ended by a blank line)" if unfinished else "")

    def _on_event(self, payload: str, out: _Answer, started: float) -> bool:
        if out.error is not None:
            return False
        if payload.strip() == "[DONE]":
            return True
        try:
            event = json.loads(payload)
        except ValueError:
            out.error, out.message = BAD_SSE, self._clean("not JSON: " + payload, _EXCERPT)
            return False
        if not isinstance(event, dict):
            out.error, out.message = BAD_SSE, self._clean("not a JSON object: " + payload, _EXCERPT)
            return False
        if "error" in event:
            out.error, out.message = STREAM_ERROR, self._clean(error_message(payload.encode()))
            return False
        if out.ttft is None and _has_output(event):
            out.ttft = time.perf_counter() - started
        _take_usage(event, out)
        return False

    def _read_completion(self, raw: bytes, out: _Answer) -> None:
        try:
            body = json.loads(raw)
        except ValueError:
            text = raw[:MAX_ERROR_BODY].decode("utf-8", "replace")
            out.error, out.message = BAD_JSON, self._clean("not JSON: " + text, _EXCERPT)
            return
        if isinstance(body, dict) and _is_error_object(body):  # a 200 that carries an error is a failure
            out.error, out.message = STREAM_ERROR, self._clean(error_message(raw))
            return
        if not isinstance(body, dict) or not isinstance(body.get("choices"), list) or not body["choices"]:
            out.error, out.message = BAD_JSON, "the answer has no `choices`"
            return
        _take_usage(body, out)

    def _read_pooling(self, raw: bytes, out: _Answer, repeat: bool) -> None:
        """An embeddings / pooling / classify / score answer (`data`) or a rerank answer (`results`)."""
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            out.error, out.message = BAD_JSON, "the answer is not a JSON object"
            return
        if _is_error_object(body):
            out.error, out.message = STREAM_ERROR, self._clean(error_message(raw))
            return
        items = body.get("results", body.get("data"))
        if not isinstance(items, list) or not items:
            out.error, out.message = BAD_JSON, "the answer has no `data` (or `results`) items"
            return
        _take_usage(body, out)
        if repeat:
            out.vectors = pooled_vectors(items)

    def _read_tokenize(self, raw: bytes, out: _Answer, sent: int) -> None:
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            out.error, out.message = BAD_JSON, "the answer is not a JSON object"
            return
        count = body.get("count")
        if isinstance(count, int) and not isinstance(count, bool):
            if count > sent + TEMPLATE_ALLOWANCE:  # more tokens than bytes sent: not a count, a broken answer
                out.error, out.message = BAD_JSON, f"/tokenize claimed {count} tokens for a {sent}-byte body"
                return
            out.prompt_tokens = count  # identical /tokenize requests must count the same

    def _clean(self, text: str, limit: int = MAX_MESSAGE) -> str:
        # Servers echo request headers in error pages now and then; the key never reaches a report. Masked
        # first, cut after: a cut first would leave the key's start, which no later mask can match.
        return clip(mask(text, self._secrets), limit)


async def _mark_reused(session: aiohttp.ClientSession, ctx: Any, params: Any) -> None:
    if isinstance(ctx.trace_request_ctx, dict):
        ctx.trace_request_ctx["reused"] = True


def redirect_message(status: int, location: str | None) -> str:
    """What a redirecting server answered; the redirect itself is not followed."""
    where = f"to {location}" if location else "without a Location"
    return f"the server answered {status}, a redirect {where}: not followed (requests go to the target only)"


def error_message(raw: bytes) -> str:
    """The server's error message from an OpenAI-style JSON body, FastAPI's `detail`, or plain text/HTML.

    Not cut: a caller masks secrets in it first, then cuts (`_text.clip`)."""
    text = raw.decode("utf-8", errors="replace")
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if isinstance(body, dict):
        for candidate in (body.get("error"), body):
            if isinstance(candidate, dict):
                for key in ("message", "detail"):
                    if isinstance(candidate.get(key), str | int | float):
                        return str(candidate[key])
            elif isinstance(candidate, str):
                return candidate
        detail = body.get("detail")
        if detail is not None:
            return json.dumps(detail)
    text = re.sub(r"<[^>]{0,200}>", " ", text)  # an HTML error page: keep its words
    return " ".join(text.split()) or "(empty body)"


async def _read_bounded(resp: aiohttp.ClientResponse, limit: int) -> bytes:
    chunks, size = [], 0
    async for chunk in resp.content.iter_chunked(64 << 10):
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise ValueError(f"the response body exceeded {limit} bytes")
    return b"".join(chunks)


def pooled_vectors(items: list[Any]) -> tuple[tuple[float, ...], ...] | None:
    """The numbers of a pooling answer's items, in input order (rerank sorts by relevance: by `index`):
    an embedding, a pooling answer's `data` (flattened), classify `probs`, a score. None when an item has
    none, or the answer is larger than MAX_VECTOR_FLOATS."""
    keyed = []
    total = 0
    for position, item in enumerate(items):
        if not isinstance(item, dict):
            return None
        numbers: list[float] = []
        for name in ("embedding", "data", "probs", "score", "relevance_score"):
            if name in item:
                if not _flatten(item[name], numbers, MAX_VECTOR_FLOATS - total):
                    return None
                break
        if not numbers:
            return None
        total += len(numbers)
        index = item.get("index", position)
        keyed.append((index if isinstance(index, int) and not isinstance(index, bool) else position, numbers))
    keyed.sort(key=lambda pair: pair[0])
    return tuple(tuple(numbers) for _, numbers in keyed)


def _flatten(value: Any, into: list[float], room: int, depth: int = 0) -> bool:
    """Numbers of a (nested) list into `into`; False for anything else, or more than `room` numbers."""
    if isinstance(value, bool) or depth > 4:
        return False
    if isinstance(value, int | float):
        if len(into) >= room or value != value or value in (float("inf"), float("-inf")):
            return False
        into.append(float(value))
        return True
    if isinstance(value, list):
        return all(_flatten(v, into, room, depth + 1) for v in value)
    return False


def _is_error_object(body: dict) -> bool:
    """`{"object": "error", ...}` or `{"error": {...}}`: what some servers send with a 200."""
    return body.get("object") == "error" or isinstance(body.get("error"), dict | str)


def _is_event_stream(resp: aiohttp.ClientResponse) -> bool:
    return resp.content_type == "text/event-stream"


def _has_output(event: dict) -> bool:
    choices = event.get("choices")
    if not isinstance(choices, list):
        return False
    for choice in choices:
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if isinstance(delta, dict) and (delta.get("content") or delta.get("tool_calls")):
            return True
    return False


def _take_usage(body: dict, out: _Answer) -> None:
    usage = body.get("usage")
    if isinstance(usage, dict):
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if isinstance(prompt, int) and not isinstance(prompt, bool):
            out.prompt_tokens = prompt
        if isinstance(completion, int) and not isinstance(completion, bool):
            out.completion_tokens = completion
