"""A minimal OpenAI-style loopback server that can misbehave on purpose.

It is the baseline of `bench/load.py` (cheap enough that the client is what gets measured) and the
hostile server of the robustness tests: garbage or cut SSE streams, stalls, connection resets, HTML
error pages, "Already borrowed" lines in its log, death mid-run. Faults are cycled per chat request:

    python tests/support/fakeserver.py --faults ok,garbage-sse,reset --log server.log
    fakeserver: listening on http://127.0.0.1:40123

`usage.prompt_tokens` is the body length / 4, so identical requests get identical counts unless the
`leak` fault is asked for. Plain asyncio streams and hand-written HTTP/1.1: no dependencies.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

FAULTS = (
    "ok", "garbage-sse", "cut-sse", "stall", "reset", "html-500", "json-500", "borrowed-log", "leak",
    "hostile-400",
    "huge-line", "long-echo",
    # lying servers (issue 23): each must get FAIL or INCOMPLETE from verify, never PASS
    "no-usage", "too-long", "model-404", "bad-context", "typeerror-400", "error-200",
    "drift",  # a body seen before gets 5 more prompt tokens: consistent under load, not what it got alone
    "bad-words-500",  # a request with bad_words gets vLLM's 500 with an empty message (its tokenizer call raised)
)  # fmt: skip
TOKENIZE = ("none", "ok", "huge")  # /tokenize: absent (404), a count of len(body) // 4, or 10**15
READY = "fakeserver: listening on "
_MAX_BODY = 64 << 20


class _Server:
    def __init__(self, faults: list[str], log_path: Path | None, die_after: float | None,
                 tokenize: str = "none") -> None:
        self.tokenize = tokenize
        # The key comes from the environment, as a real server's would; a wrong one is echoed back in
        # the 401 message, like careless servers do, so that tests can check the client redacts it.
        self.api_key = os.environ.get("BORROWGUARD_FAKE_API_KEY")
        # Every /v1/ request answered with a 307 to this origin (another server): a client must not follow.
        self.redirect_to = os.environ.get("BORROWGUARD_FAKE_REDIRECT")
        self.faults = itertools.cycle(faults)
        self.log = open(log_path, "a", encoding="utf-8", buffering=1) if log_path else None  # noqa: SIM115
        self.die_after = die_after
        self.chats = 0
        self.stalled = 0  # chats held by the `stall` fault right now
        self.seen: set[int] = set()  # hashes of the chat bodies answered (the `drift` fault)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {
                    k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:] if h)
                }
                length = int(headers.get("content-length", "0"))
                if length > _MAX_BODY:
                    return
                body = await reader.readexactly(length) if length else b""
                if (
                    self.api_key
                    and path.startswith("/v1/")
                    and headers.get("authorization") != (f"Bearer {self.api_key}")
                ):
                    given = json.dumps(headers.get("authorization", ""))[1:-1]
                    _send(writer, 401, b'{"error":{"message":"invalid API key: %s"}}' % given.encode())
                    continue
                if self.redirect_to and path.startswith("/v1/"):
                    writer.write(f"HTTP/1.1 307 Temporary Redirect\r\nLocation: {self.redirect_to}{path}\r\n"
                                 "Content-Length: 0\r\n\r\n".encode())
                    continue
                if not await self.route(method, path, body, writer):
                    return
        except (asyncio.IncompleteReadError, ConnectionError, ValueError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def route(self, method: str, path: str, body: bytes, writer: asyncio.StreamWriter) -> bool:
        if method == "GET" and path == "/health":
            return _send(writer, 200, b"", "text/plain")
        if method == "GET" and path == "/v1/models":
            return _send(writer, 200, b'{"object":"list","data":[{"id":"fake-model","object":"model"}]}')
        if method == "GET" and path == "/metrics":
            text = (
                f"# TYPE fake_requests_total counter\nfake_requests_total {self.chats}\n"
                f"# TYPE fake_stalled gauge\nfake_stalled {self.stalled}\n"
            )
            return _send(writer, 200, text.encode(), "text/plain; version=0.0.4")
        if method == "POST" and path in ("/v1/chat/completions", "/v1/completions"):
            self.chats += 1
            return await self.chat(next(self.faults), body, writer)
        if method == "POST" and path == "/tokenize" and self.tokenize != "none":
            count = 10**15 if self.tokenize == "huge" else max(1, len(body) // 4)
            return _send(writer, 200, json.dumps({"count": count, "max_model_len": 4096, "tokens": []}).encode())
        return _send(writer, 404, b'{"error":{"message":"not found","type":"NotFoundError"}}')

    async def chat(self, fault: str, body: bytes, writer: asyncio.StreamWriter) -> bool:
        try:
            stream = json.loads(body).get("stream") is True
        except (ValueError, AttributeError):
            return _send(writer, 400, b'{"error":{"message":"body is not a JSON object"}}')
        prompt_tokens = len(body) // 4
        if fault == "leak" and self.chats % 3 == 0:
            prompt_tokens -= 7  # as if another request's truncation had applied to this one
        if fault == "reset":
            writer.transport.abort()
            return False
        if fault == "bad-words-500" and b'"bad_words"' in body:
            return _send(writer, 500, b'{"object":"error","message":"","type":"InternalServerError","code":500}')
        lie = _LIES.get(fault)
        if lie is not None:
            return _send(writer, lie[0], json.dumps(lie[1]).encode())
        if fault == "hostile-400":
            # Echoes the key (as careless servers do in errors and logs) and tries to drive the terminal.
            echo = f"bad request (key {self.api_key}) \x1b]0;pwned\x07\x1b[2J\x1b[31mred"
            if self.log is not None:
                self.log.write(f"ERROR request with Authorization: Bearer {self.api_key} failed\n")
            return _send(writer, 400, json.dumps({"error": {"message": echo}}).encode())
        if fault == "long-echo":
            # The key echoed where a 300-character cut falls inside it: masked first, nothing of it survives.
            # A plain-text page, as proxies and frameworks answer errors.
            echo = "x" * 290 + f"{self.api_key}" + " and more" * 40
            return _send(writer, 400, echo.encode(), "text/plain")
        if fault == "html-500":
            page = b"<html><head><title>500</title></head><body><h1>Internal Server Error</h1></body></html>"
            return _send(writer, 500, page, "text/html")
        if fault == "json-500":
            msg = b'{"error":{"message":"RuntimeError: Already borrowed","type":"InternalServerError"}}'
            return _send(writer, 500, msg)
        if fault == "borrowed-log" and self.log is not None:
            self.log.write(
                f"ERROR {time.strftime('%m-%d %H:%M:%S')} [serving_chat.py:210] "
                "Error in preprocessing prompt inputs\n"
                "Traceback (most recent call last):\n"
                '  File "transformers/tokenization_utils_fast.py", line 494, in set_truncation_and_padding\n'
                "    self._tokenizer.enable_truncation(**target)\n"
                "RuntimeError: Already borrowed\n"
            )
        if fault == "stall":
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
            )
            self.stalled += 1
            try:
                await asyncio.sleep(3600)
            finally:
                self.stalled -= 1
            return False
        usage: dict | None = {"prompt_tokens": prompt_tokens, "completion_tokens": 4,
                              "total_tokens": prompt_tokens + 4}
        if fault == "no-usage":
            usage = None
        if fault == "drift":
            if hash(body) in self.seen:
                usage = {**usage, "prompt_tokens": prompt_tokens + 5}
            self.seen.add(hash(body))
        if not stream and fault not in ("garbage-sse", "cut-sse", "huge-line"):
            answer = {
                "id": f"chatcmpl-{self.chats}",
                "object": "chat.completion",
                "model": "fake-model",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "ok ok ok ok"},
                        "finish_reason": "stop",
                    }
                ],
            }
            if usage is not None:
                answer["usage"] = usage
            return _send(writer, 200, json.dumps(answer).encode())
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        for event in _events(fault, usage):
            writer.write(b"%x\r\n%s\r\n" % (len(event), event))
        if fault in ("cut-sse", "huge-line"):
            await writer.drain()
            writer.transport.abort()
            return False
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True


# status and body of each lying answer (vLLM's wordings, with the lie in them)
_LIES = {
    # a context-length refusal whose numbers hold, for every prompt, however small
    "too-long": (400, {"object": "error", "type": "BadRequestError", "code": 400, "message":
                       "This model's maximum context length is 4096 tokens. However, your request has 5000 "
                       "input tokens. Please reduce the length of the messages."}),
    # the model the preflight listed is gone
    "model-404": (404, {"object": "error", "type": "NotFoundError", "code": 404,
                        "message": "The model `fake-model` does not exist."}),
    # a context-length refusal its own numbers contradict
    "bad-context": (400, {"object": "error", "type": "BadRequestError", "code": 400, "message":
                          "This model's maximum context length is 4096 tokens. However, your request has 30 "
                          "input tokens. Please reduce the length of the messages."}),
    # a bug of the server's own code, said in a 400
    "typeerror-400": (400, {"object": "error", "type": "BadRequestError", "code": 400, "message":
                            "TypeError: OpenAIServingChat.create_chat_completion() got an unexpected keyword "
                            "argument 'request_id'"}),
    # an error carried in a 200
    "error-200": (200, {"object": "error", "message": "Already borrowed", "choices": []}),
}


def _events(fault: str, usage: dict | None) -> Iterator[bytes]:
    if fault == "huge-line":
        yield b"data: " + b"x" * (3 << 20)
        return
    for word in ("ok", " ok", " ok", " ok"):
        delta = {"choices": [{"index": 0, "delta": {"content": word}, "finish_reason": None}]}
        yield b"data: " + json.dumps(delta).encode() + b"\n\n"
        if fault == "cut-sse":
            return
        if fault == "garbage-sse":
            yield b"data: {this is not json\n\n"
    if usage is not None:
        yield b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\n"
    yield b"data: [DONE]\n\n"


def _send(writer: asyncio.StreamWriter, status: int, body: bytes, ctype: str = "application/json") -> bool:
    reason = {
        200: "OK",
        400: "Bad Request",
        401: "Unauthorized",
        404: "Not Found",
        500: "Internal Server Error",
    }
    reason = reason[status]
    writer.write(
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    return True


async def serve(port: int, faults: list[str], log_path: Path | None, die_after: float | None,
                tokenize: str = "none") -> None:
    server = _Server(faults, log_path, die_after, tokenize)
    srv = await asyncio.start_server(server.handle, "127.0.0.1", port, backlog=1024)
    print(f"{READY}http://127.0.0.1:{srv.sockets[0].getsockname()[1]}", flush=True)
    if die_after is not None:
        await asyncio.sleep(die_after)
        if server.log is not None:
            server.log.write("ERROR [core_client.py] Engine core proc EngineCore_DP0 died unexpectedly\n")
        os._exit(3)  # like a crashed engine: no goodbye, sockets reset
    async with srv:
        await srv.serve_forever()


class FakeServer:
    """Runs the fake server in a subprocess: `with FakeServer(faults=["ok"]) as srv: srv.url`."""

    def __init__(
        self,
        faults: list[str] | None = None,
        log_path: Path | None = None,
        die_after: float | None = None,
        start_timeout: float = 30.0,
        api_key: str | None = None,
        redirect_to: str | None = None,
        tokenize: str = "none",
    ) -> None:
        unknown = set(faults or []) - set(FAULTS)
        if unknown or tokenize not in TOKENIZE:
            raise ValueError(f"unknown faults: {sorted(unknown)} (or tokenize {tokenize!r})")
        self.args = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--faults",
            ",".join(faults or ["ok"]),
            "--tokenize",
            tokenize,
        ]
        if log_path is not None:
            self.args += ["--log", str(log_path)]
        if die_after is not None:
            self.args += ["--die-after", str(die_after)]
        self.start_timeout = start_timeout
        self.env = dict(os.environ)
        self.env.pop("BORROWGUARD_FAKE_API_KEY", None)
        if api_key:
            self.env["BORROWGUARD_FAKE_API_KEY"] = api_key
        self.env.pop("BORROWGUARD_FAKE_REDIRECT", None)
        if redirect_to:
            self.env["BORROWGUARD_FAKE_REDIRECT"] = redirect_to
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""

    def __enter__(self) -> FakeServer:
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, text=True, env=self.env)
        assert self.proc.stdout is not None
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if line.startswith(READY):
                self.url = line[len(READY) :].strip()
                return self
            if not line and self.proc.poll() is not None:
                break
        self.__exit__()
        raise RuntimeError(f"the fake server did not start: {self.args}")

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()

    def poll(self) -> int | None:
        return None if self.proc is None else self.proc.poll()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python tests/support/fakeserver.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument(
        "--faults", default="ok", help=f"comma-separated, cycled per request: {', '.join(FAULTS)}"
    )
    parser.add_argument("--log", type=Path, default=None, help="append log lines here (borrowed-log, death)")
    parser.add_argument("--die-after", type=float, default=None, help="exit abruptly after this many seconds")
    parser.add_argument("--tokenize", choices=TOKENIZE, default="none", help="how POST /tokenize answers")
    args = parser.parse_args(argv)
    faults = [f.strip() for f in args.faults.split(",") if f.strip()]
    if not faults or set(faults) - set(FAULTS):
        parser.error(f"--faults: choose from {', '.join(FAULTS)}")
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.port, faults, args.log, args.die_after, args.tokenize))


if __name__ == "__main__":
    main()
