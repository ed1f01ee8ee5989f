"""Start the reference server in this process: guard, tokenizer, app, uvicorn, readiness.

Order matters: the guard is installed before the tokenizer is loaded (as the vLLM plugin does), and
readiness is announced only once a real GET /health over the listening socket has returned 200.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable

from borrowguard._version import __version__
from borrowguard.errors import BorrowguardError, ConfigError, UserInputError
from borrowguard.server import logs
from borrowguard.server.app import ServerState, create_app
from borrowguard.server.config import WATCH_STDIN_ENV, ServerConfig
from borrowguard.server.engine import NAME as ENGINE_NAME
from borrowguard.server.engine import StubEngine
from borrowguard.server.frontend import FrontEnd, load_tokenizer
from borrowguard.server.metrics import Metrics

LISTENING = "borrowguard serve: listening on {url} ({engine} engine, guard {guard})"

_LOOPBACK = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}


def listening_line(url: str, guard: bool) -> str:
    return LISTENING.format(url=url, engine=ENGINE_NAME, guard="on" if guard else "off")


def install_guard() -> None:
    import borrowguard

    borrowguard.install()
    logs.get_logger().info("borrowguard guard installed (borrowguard.install()): is_installed() = %s",
                           borrowguard.is_installed())


def build_state(config: ServerConfig) -> ServerState:
    if config.guard:
        install_guard()  # before the tokenizer exists, as the vLLM plugin does
    tokenizer = load_tokenizer(config.tokenizer_dir)
    frontend = FrontEnd(tokenizer, config.workers, allow_remote_images=config.allow_remote_images,
                        allow_remote_name=config.said("allow_remote_images"))
    return ServerState(
        model=config.model_name,
        frontend=frontend,
        engine=StubEngine(frontend, config.token_delay_ms),
        metrics=Metrics(config.guard),
        max_body_bytes=config.max_body_bytes,
        max_body_name=config.said("max_body_mb"),
    )


def bind(host: str, port: int) -> socket.socket:
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ConfigError("host", "cannot resolve {} ", detail=f"{host!r}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise UserInputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.setblocking(False)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def serve(config: ServerConfig, on_ready: Callable[[str], None] | None = None) -> None:
    """Run the server until SIGINT/SIGTERM. `on_ready(listening_line)` is called once it answers /health."""
    import uvicorn

    logger = logs.configure(config.log_file)
    logger.info("borrowguard %s reference server: real front end, %s engine (no model), guard %s",
                __version__, ENGINE_NAME, "on" if config.guard else "off")
    sock = bind(config.host, config.port)  # first: a busy port fails fast, before any heavy loading
    try:
        state = build_state(config)
    except BaseException:
        sock.close()
        raise
    tokenizer = state.frontend.tokenizer
    logger.info("Tokenizer %s (%s) from %s, shared by %d tokenization threads and 1 image thread; "
                "served model name %r, max_model_len %d", type(tokenizer).__name__,
                "fast" if getattr(tokenizer, "is_fast", False) else "slow", config.tokenizer_dir,
                config.workers, state.model, state.frontend.max_model_len)
    if config.host not in ("127.0.0.1", "localhost", "::1"):
        logger.warning("Listening on %s: reachable from other machines, with no authentication.", config.host)
    uv_config = uvicorn.Config(create_app(state), log_level="warning", access_log=True, log_config=None,
                               lifespan="off", timeout_graceful_shutdown=3, server_header=False)
    logging.getLogger("uvicorn.access").setLevel(logging.INFO)  # after uvicorn set its loggers to warning
    server = uvicorn.Server(uv_config)
    line = listening_line(url_of(sock), config.guard)

    def on_sigterm(signum: int, frame: object) -> None:
        server.should_exit = True

    # uvicorn shuts down gracefully on SIGTERM, then raises the signal again for the previous handler;
    # with the default one the process would die before it logs that it stopped. Ours asks for the same
    # graceful exit (a no-op once uvicorn is done), so serve() returns normally.
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, on_sigterm) if main_thread else None
    if os.environ.get(WATCH_STDIN_ENV) == "1":
        threading.Thread(target=_stop_when_stdin_closes, args=(server,), daemon=True).start()
    try:
        asyncio.run(_serve(server, sock, line, on_ready))
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)
        state.frontend.close()
        sock.close()
        logger.info("borrowguard serve: stopped")


def _stop_when_stdin_closes(server: object, grace: float = 10.0) -> None:
    with contextlib.suppress(OSError, ValueError):
        while sys.stdin.buffer.read(4096):
            pass
    logs.get_logger().warning("borrowguard serve: the process that started it is gone; stopping")
    server.should_exit = True  # type: ignore[attr-defined]
    time.sleep(grace)
    os._exit(1)  # the graceful stop hung: go anyway


async def _serve(server: object, sock: socket.socket, line: str,
                 on_ready: Callable[[str], None] | None) -> None:
    task = asyncio.ensure_future(server.serve(sockets=[sock]))  # type: ignore[attr-defined]
    while not server.started:  # type: ignore[attr-defined]
        if task.done():
            await task
            raise BorrowguardError("the HTTP server stopped during start-up")
        await asyncio.sleep(0.01)
    host, port = sock.getsockname()[:2]
    status = await _health_status(_LOOPBACK.get(host, host), port)
    if status != 200:
        server.should_exit = True  # type: ignore[attr-defined]
        await task
        raise BorrowguardError(f"GET /health answered {status} during start-up")
    logs.get_logger().info("Ready: GET /health answered 200 on port %d", port)
    if on_ready is not None:
        on_ready(line)
    await task


async def _health_status(host: str, port: int, timeout: float = 10.0) -> int:
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    try:
        writer.write(b"GET /health HTTP/1.1\r\nHost: borrowguard\r\nConnection: close\r\n\r\n")
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), timeout)
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    parts = status_line.split()
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
