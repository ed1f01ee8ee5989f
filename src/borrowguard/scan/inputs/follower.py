"""Several sources followed at once, a thread each: the one threaded follower of the code base.

`scan --follow` (scan.live) and verify's log watch (verify.watch) both run on it; each says what becomes
of a line (`on_line`, called in the source's own thread) and of a source's end (`on_end`).

    follower = Follower(on_line=lambda name, line: ..., stop=stop)
    follower.add_file(path, start_at=size)        # or from_end=True, or from its start
    follower.add_command("docker logs -f vllm")    # its exit status is kept (SourceState.exit_code)
    follower.start(); ...; follower.stop()         # or follower.wait(): until every source has ended
    follower.states()                              # per source: lines, last line, error, how it ended
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial

from borrowguard.scan.inputs.command_follower import follow_command
from borrowguard.scan.inputs.file_follower import follow_file

OpenLines = Callable[[], Iterator[str]]
"""What starts reading a source's lines (called in the source's own thread)."""


@dataclass(frozen=True)
class SourceState:
    """One source, as far as it was read: its lines, the last non-blank one, the error that stopped it
    (None: it ran to its end or to the stop), and for a command whether it exited by itself, and how."""

    name: str
    kind: str  # "file", "command" or "stream"
    lines: int = 0
    last: str | None = None
    error: Exception | None = None
    exited: bool = False  # a command that ended by itself, before the stop
    exit_code: int | None = None  # its status (None: it closed its output but did not exit)


class Follower:
    """Reads each added source in a thread of its own until it ends or `stop` is set; `on_line(name,
    line)` hears every line, `on_end(name, error)` each source's end (error None: it ran to its end or
    to the stop). A source that fails is recorded, never raised: one failing log must not take the others
    with it. Callbacks of different sources may run at the same time."""

    def __init__(
        self,
        on_line: Callable[[str, str], None],
        stop: threading.Event | None = None,
        *,
        on_end: Callable[[str, Exception | None], None] | None = None,
    ) -> None:
        self._on_line = on_line
        self._on_end = on_end
        self.stop_event = stop if stop is not None else threading.Event()
        self._grace_until: float | None = None
        """Set by `stop()`: until then a source's reader keeps handing on what it reads (what was written before
        the stop); a stop set from outside (a signal) ends the reading at once."""
        self._opens: list[tuple[str, OpenLines]] = []
        self._reading: dict[str, _Reading] = {}
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def add(self, name: str, kind: str, open_lines: OpenLines) -> None:
        self._reading.setdefault(name, _Reading(kind))
        self._opens.append((name, open_lines))

    def add_file(
        self,
        path: str | os.PathLike[str],
        *,
        name: str | None = None,
        poll_interval: float = 0.2,
        from_end: bool = False,
        start_at: int | None = None,
        on_note: Callable[[str], None] | None = None,
    ) -> None:
        """A file followed as it grows (scan.inputs.file_follower), from its start unless `from_end` or
        `start_at` say otherwise."""
        self.add(name or str(path), "file", partial(
            follow_file, path, self.stop_event, poll_interval, from_end=from_end, start_at=start_at,
            on_note=on_note,
        ))

    def add_command(
        self, command: str | Sequence[str], *, name: str | None = None, on_note: Callable[[str], None] | None = None
    ) -> None:
        """A command's output (scan.inputs.command_follower); its exit, when it ends by itself, is kept."""
        key = name or (command if isinstance(command, str) else " ".join(command))
        self.add(key, "command", lambda: follow_command(
            command, self.stop_event, on_exit=partial(self._exited, key), on_note=on_note
        ))

    def start(self) -> None:
        for i, (name, open_lines) in enumerate(self._opens):
            thread = threading.Thread(
                target=self._read, args=(name, open_lines), name=f"borrowguard-follow-{i}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    @property
    def alive(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    def wait(self, on_tick: Callable[[], None] | None = None) -> None:
        """Until every source has ended or the stop is set (then each gets `stop()`'s time). Joined in short
        steps, so that a signal reaches the waiting thread; `on_tick` is called after each step (scan
        decides there the lines of a quiet log that wait for their context)."""
        try:
            while self.alive:
                for t in self._threads:
                    t.join(timeout=0.2)
                if on_tick is not None:
                    on_tick()
        finally:
            self.stop()

    def stop(self, timeout: float = 5.0) -> None:
        """Set the stop and give each source `timeout` seconds to end (what is written is still read)."""
        self._grace_until = time.monotonic() + timeout
        self.stop_event.set()
        for t in self._threads:
            t.join(timeout=timeout)

    def states(self) -> list[SourceState]:
        """Each source as far as it was read, in the order they were added."""
        with self._lock:
            return [r.state(name) for name, r in self._reading.items()]

    def state(self, name: str) -> SourceState:
        with self._lock:
            return self._reading[name].state(name)

    def _exited(self, name: str, code: int | None) -> None:
        with self._lock:
            self._reading[name].exited, self._reading[name].exit_code = True, code

    def _read(self, name: str, open_lines: OpenLines) -> None:
        reading = self._reading[name]  # this thread's alone to write (`states()` copies it under the lock)
        error: Exception | None = None
        lines = None
        try:
            lines = open_lines()
            for line in lines:
                reading.lines += 1
                if line.strip():
                    reading.last = line
                self._on_line(name, line)
                # a file's reader ends by itself once the stop is set and it has read what was written; a
                # source that never ends (a flooding log) is cut when its grace runs out
                if self.stop_event.is_set() and (self._grace_until is None or time.monotonic() >= self._grace_until):
                    break
        except Exception as exc:  # a source that fails is reported by its reader, not raised in its thread
            error = reading.error = exc
        finally:
            close = getattr(lines, "close", None)
            if close is not None:
                close()  # a command is ended with its reading, also when the stop came mid-way
        if self._on_end is not None:
            self._on_end(name, error)


class _Reading:
    """A source's progress, written by its reading thread (and `_exited`, from the same thread)."""

    __slots__ = ("error", "exit_code", "exited", "kind", "last", "lines")

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.lines = 0
        self.last: str | None = None
        self.error: Exception | None = None
        self.exited = False
        self.exit_code: int | None = None

    def state(self, name: str) -> SourceState:
        return SourceState(name, self.kind, self.lines, self.last, self.error, self.exited, self.exit_code)
