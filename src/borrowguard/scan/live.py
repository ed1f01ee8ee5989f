"""Follow mode: several growing sources at once (files, stdin, one command), hits reported as they happen."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator, Sequence

from borrowguard.errors import BorrowguardError
from borrowguard.scan.model import Hit
from borrowguard.scan.normalize import decode
from borrowguard.scan.readers import (
    READ_SIZE,
    Input,
    LineSplitter,
    command_argv,
    follow_command,
    follow_file,
)
from borrowguard.scan.scanner import Scanner


def follow(
    scanner: Scanner,
    inputs: Sequence[Input],
    stop: threading.Event,
    *,
    command: str | None = None,
    on_hit: Callable[[Hit], None] | None = None,
    poll_interval: float = 0.2,
    from_end: bool = False,
) -> None:
    """Feed every line of every source into `scanner` until `stop` is set (or every source has ended:
    stdin at EOF, the command exited). `on_hit` is called for each hit, from the reading threads but
    never concurrently. Errors of one source (a file that becomes unreadable) end only that source and
    are noted in the scanner's warnings."""
    report_lock = threading.Lock()
    sources: list[tuple[str, Callable[[], Iterator[str]]]] = []
    for inp in inputs:
        if inp.path is None:
            sources.append((inp.name, lambda: _stdin_lines(stop)))
        else:
            path = inp.path
            sources.append(
                (inp.name, lambda p=path: follow_file(p, stop, poll_interval, from_end=from_end))  # type: ignore[misc]
            )
    if command:
        command_argv(command)  # a command that cannot run is the user's mistake, not a warning
        sources.append((f"$ {command}", lambda: follow_command(command, stop)))

    def pump(name: str, make: Callable[[], Iterator[str]]) -> None:
        try:
            for line in make():
                hits = scanner.feed(line, source=name)
                if hits and on_hit is not None:
                    with report_lock:
                        for hit in hits:
                            on_hit(hit)
            for hit in scanner.finish(name):
                if on_hit is not None:
                    with report_lock:
                        on_hit(hit)
        except (BorrowguardError, OSError) as exc:
            scanner.warn(f"{name}: stopped following: {exc}")

    threads = [threading.Thread(target=pump, args=s, name=f"borrowguard-follow-{i}", daemon=True)
               for i, s in enumerate(sources)]
    for t in threads:
        t.start()
    try:
        while any(t.is_alive() for t in threads):
            for t in threads:
                t.join(timeout=0.2)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=5)


def _stdin_lines(stop: threading.Event) -> Iterator[str]:
    # stdin cannot be polled portably; a pipe ends at EOF, which also ends this source.
    splitter = LineSplitter()
    while not stop.is_set():
        data = sys.stdin.buffer.read1(READ_SIZE)
        if not data:
            break
        for raw in splitter.push(data):
            yield decode(raw)
    for raw in splitter.flush():
        yield decode(raw)
