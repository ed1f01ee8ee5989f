"""Follow mode: several growing sources at once (files, stdin, one command), hits reported as they happen."""

from __future__ import annotations

import os
import signal
import stat
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from borrowguard._text import printable
from borrowguard.errors import UserInputError
from borrowguard.scan.inputs.command_follower import command_argv
from borrowguard.scan.inputs.follower import Follower, SourceState
from borrowguard.scan.inputs.kind import GZIP_MAGIC, SNIFF, not_text, text_encoding
from borrowguard.scan.inputs.readers import READ_SIZE, Input, LineSplitter
from borrowguard.scan.inputs.report import InputReport
from borrowguard.scan.inputs.stream import open_stream
from borrowguard.scan.model import Hit, excerpt
from borrowguard.scan.normalize import decode
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
    report: InputReport | None = None,
) -> InputReport:
    """Feed every line of every source into `scanner` until `stop` is set (or every source has ended:
    stdin at EOF, the command exited). `on_hit` is called for each hit, from the reading threads but
    never concurrently.

    What happened to the sources goes to `report` (returned; apply it to `scanner.result()`): a command
    that exits with an error, a source that fails, a command that writes nothing (warnings: not a clean
    scan); a rotated .gz read once instead of followed, a binary file skipped, long lines (notes).
    FIFOs and `<(...)` are read as streams. UserInputError when nothing can be followed."""
    report = report if report is not None else InputReport()
    pump = _Pump(scanner, on_hit, report)
    follower = Follower(pump.line, stop, on_end=pump.end)
    skipped = _add_inputs(follower, inputs, poll_interval, from_end, report)
    command_name = f"$ {command}" if command is not None else None
    if command is not None and command_name is not None:
        command_argv(command)  # a command that cannot run is the user's mistake, not a warning
        follower.add_command(command, name=command_name, on_note=report.note)
    if not follower.states():
        raise UserInputError(printable("nothing to follow: " + "; ".join(skipped[:3])))
    follower.start()
    follower.wait(on_tick=pump.idle)
    if command_name is not None:
        _judge_command(follower.state(command_name), report)
    return report


def _add_inputs(
    follower: Follower, inputs: Sequence[Input], poll_interval: float, from_end: bool, report: InputReport
) -> list[str]:
    """Each input, followed as it grows or read once as a stream; returns those skipped (with why). What
    the operator should know about the choice goes to `report`."""
    stop = follower.stop_event
    skipped: list[str] = []
    for inp in inputs:
        name = inp.name
        if inp.path is None:
            follower.add(name, "stream", lambda: _stream_lines(sys.stdin.buffer, "<stdin>", stop, report))
            continue
        path = inp.path
        kind, why = _classify(path)
        read_once = partial(_open_stream_lines, path, name, stop, report)
        if kind == "stream":
            follower.add(name, "stream", read_once)
        elif kind == "gzip" and from_end:
            skipped.append(name)
            report.note(f"skipped {name}: gzip-compressed (a rotated log); following from the end skips what files hold")
        elif kind == "gzip":
            report.note(f"{name}: gzip-compressed (a rotated log): read once, decompressed, not followed")
            follower.add(name, "stream", read_once)
        elif kind == "binary":
            skipped.append(f"{name}: {why}")
            report.note(f"skipped {name}: {why}")
        else:
            follower.add_file(path, name=name, poll_interval=poll_interval, from_end=from_end, on_note=report.note)
    return skipped


class _Pump:
    """Feeds every source's lines into the one scanner (from the sources' threads: the scanner locks) and
    passes hits to `on_hit`, never concurrently. A source that fails is reported, not raised."""

    def __init__(self, scanner: Scanner, on_hit: Callable[[Hit], None] | None, report: InputReport) -> None:
        self._scanner = scanner
        self._on_hit = on_hit
        self._report = report
        self._lock = threading.Lock()

    def line(self, name: str, line: str) -> None:
        self._tell(self._scanner.feed(line, source=name))

    def end(self, name: str, error: Exception | None) -> None:
        if error is None:
            self._tell(self._scanner.finish(name))
        else:
            self._report.fail(f"{name}: stopped following: {error}")

    def idle(self) -> None:
        """A quiet moment: lines waiting for their context that long are decided (Scanner.settle_idle)."""
        self._tell(self._scanner.settle_idle())

    def _tell(self, hits: list[Hit]) -> None:
        if hits and self._on_hit is not None:
            with self._lock:
                for hit in hits:
                    self._on_hit(hit)


def _judge_command(command: SourceState, report: InputReport) -> None:
    """A log command that fails, ends early or never writes a line is reported, never a clean log."""
    name, lines, last = command.name, command.lines, command.last
    said = f"{lines:,} line{'s' if lines != 1 else ''}"
    tail = f"; its last line: {excerpt(last, 160)!r}" if last else ""
    if not command.exited:
        if lines == 0:
            report.warn(f"{name}: the command wrote nothing while it was followed: no log was scanned")
        return
    code = command.exit_code
    if code is None:
        report.warn(f"{name}: the command closed its output after {said} but did not exit{tail}")
    elif code < 0:
        try:
            signame = signal.Signals(-code).name
        except ValueError:
            signame = f"signal {-code}"
        report.fail(f"{name}: the command was killed by {signame} after {said}{tail}")
    elif code != 0:
        report.fail(f"{name}: the command failed (exit status {code}) after {said}{tail}")
    elif lines == 0:
        report.warn(f"{name}: the command ended (exit status 0) without writing a line: no log was scanned")
    else:
        report.note(f"{name}: the command ended by itself (exit status 0) after {said}; following stopped")


def _classify(path: Path) -> tuple[str, str | None]:
    """"stream" (a FIFO, `<(...)`, a device: read once, as it comes), "gzip" (a rotated log), "binary"
    (with why), or "file" (followed as it grows; also when it does not exist yet)."""
    try:
        st = os.stat(path)
    except OSError:
        return "file", None
    if not stat.S_ISREG(st.st_mode):
        return "stream", None
    try:
        with open(path, "rb") as fh:
            head = fh.read(SNIFF)
    except OSError:
        return "file", None  # follow_file says what is wrong when it opens it
    if head.startswith(GZIP_MAGIC):
        return "gzip", None
    if text_encoding(head)[0] is not None:
        return "file", None
    why = not_text(head)
    return ("binary", why) if why else ("file", None)


def _open_stream_lines(path: Path, name: str, stop: threading.Event, report: InputReport) -> Iterator[str]:
    with open(path, "rb") as fh:  # a FIFO: blocks until its writer opens it, like `cat` would
        yield from _stream_lines(fh, name, stop, report)


def _stream_lines(fileobj: Any, name: str, stop: threading.Event, report: InputReport) -> Iterator[str]:
    # A pipe cannot be polled portably; it ends at EOF, which also ends this source.
    opened = open_stream(fileobj, name, live=True)
    if opened.not_a_log:
        report.note(f"skipped {name}: {opened.not_a_log}")
        return
    splitter = LineSplitter()
    while not stop.is_set():
        data = opened.read1(READ_SIZE)
        if not data:
            break
        for raw in splitter.push(data):
            yield decode(raw)
    for raw in splitter.flush():
        yield decode(raw)
    report.read(opened)
