"""Signals during a verify run: SIGINT and SIGTERM both end the run at once with a partial result.

Before the event loop runs (the bundled server is starting), SIGTERM raises KeyboardInterrupt like Ctrl-C,
so the server is stopped rather than orphaned; once the loop runs, the first SIGINT or SIGTERM calls the
session's (or the fleet's) interrupt, which cancels the preflight and the drain of in-flight requests, and a
second one raises KeyboardInterrupt: the run exits now, without a report.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Iterator
from typing import Any


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Until the event loop takes over signals, SIGTERM interrupts like Ctrl-C (so that the bundled
    server, starting meanwhile, is stopped instead of orphaned)."""

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def install_interrupts(on_signal: Callable[[], None]) -> Callable[[], None]:
    """The first SIGINT or SIGTERM calls `on_signal` on the running loop, the second raises KeyboardInterrupt
    out of it (exit now); returns the function that undoes it."""
    loop = asyncio.get_running_loop()
    installed = []
    seen: list[int] = []

    def handle() -> None:
        if seen:
            raise KeyboardInterrupt  # asked twice: stop waiting for anything
        seen.append(1)
        on_signal()

    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, handle)
            installed.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or Windows
            pass

    def restore() -> None:
        for sig in installed:
            loop.remove_signal_handler(sig)

    return restore
