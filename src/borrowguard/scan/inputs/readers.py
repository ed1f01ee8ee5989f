"""Where log lines come from: files, globs, stdin, .gz; read whole (`open_input`), split into capped lines.

Everything is read as bytes (logs are not guaranteed UTF-8) and in bounded pieces. Growing sources have
their own modules: file_follower (`follow_file`, a file as it grows) and command_follower
(`follow_command`, a command's output); they yield text lines with invalid bytes replaced and every line
capped like the scanner caps it.
"""

from __future__ import annotations

import contextlib
import glob
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from borrowguard.errors import UserInputError
from borrowguard.scan.inputs.stream import Opened, open_stream
from borrowguard.scan.normalize import ELLIPSIS_BYTES, HEAD, MAX_LINE

STDIN = "-"
READ_SIZE = 1 << 16


@dataclass(frozen=True)
class Input:
    name: str
    """What reports call it: the path as given, or "<stdin>"."""
    path: Path | None
    """None for stdin."""


def expand(specs: Sequence[str]) -> list[Input]:
    """Paths, globs (`logs/*.log*`, `**` too) and `-` for stdin, each once, in the order given."""
    inputs: list[Input] = []
    seen: set[str] = set()
    for spec in specs:
        if spec == STDIN:
            if STDIN not in seen:
                seen.add(STDIN)
                inputs.append(Input("<stdin>", None))
            continue
        if glob.has_magic(spec):
            matches = sorted(glob.glob(spec, recursive=True))
            files = [m for m in matches if os.path.isfile(m)]
            if not files:
                raise UserInputError(f"no file matches {spec!r}")
        else:
            path = Path(spec)
            if not path.exists():
                raise UserInputError(f"no such file: {spec}")
            if path.is_dir():
                raise UserInputError(f"{spec} is a directory; give files or a glob such as '{spec}/*.log'")
            files = [spec]
        for f in files:
            if f not in seen:
                seen.add(f)
                inputs.append(Input(f, Path(f)))
    return inputs


@contextlib.contextmanager
def open_input(inp: Input) -> Iterator[Opened]:
    """The input's log text as a binary stream, read front to back without seeking (pipes, FIFOs and
    `<(...)` read like files): gzip (by magic bytes, whatever the name) decompressed as far as it goes,
    UTF-16 and byte-order marks decoded; `not_a_log` says why a binary file is not read (see stream)."""
    try:
        if inp.path is None:
            yield open_stream(sys.stdin.buffer, inp.name)
            return
        try:
            raw = inp.path.open("rb")
        except OSError as exc:
            raise UserInputError(f"cannot read {inp.name}: {exc.strerror or exc}") from None
        with raw:
            yield open_stream(raw, inp.name)
    except OSError as exc:
        raise UserInputError(f"cannot read {inp.name}: {exc.strerror or exc}") from None


class LineSplitter:
    """Bytes in, capped lines out: a line longer than MAX_LINE keeps its ends (as the scanner would).

    `on_long(line_no)` is called for the first line that was too long (to be said once, not per line)."""

    def __init__(self, on_long: Callable[[int], None] | None = None) -> None:
        self._pending = b""
        self._head: bytes | None = None
        self._on_long = on_long
        self.lines = 0
        self.long = 0

    def push(self, data: bytes) -> list[bytes]:
        lines: list[bytes] = []
        data = self._pending + data
        start = 0
        while True:
            nl = data.find(b"\n", start)
            if nl == -1:
                break
            if self._head is None and nl - start <= MAX_LINE:
                self.lines += 1
                lines.append(data[start:nl])
            else:
                lines.append(self._finish(data[start:nl]))
            start = nl + 1
        rest = data[start:]
        if len(rest) > MAX_LINE:
            if self._head is None:
                self._head = rest[:HEAD]
            rest = rest[-HEAD:]
        self._pending = rest
        return lines

    def flush(self) -> list[bytes]:
        if not self._pending and self._head is None:
            return []
        line = self._finish(self._pending)
        self._pending = b""
        return [line]

    def _finish(self, line: bytes) -> bytes:
        self.lines += 1
        if self._head is not None or len(line) > MAX_LINE:
            self.long += 1
            if self.long == 1 and self._on_long is not None:
                self._on_long(self.lines)
        if self._head is not None:
            line, self._head = self._head + ELLIPSIS_BYTES + line[-HEAD:], None
        return line
