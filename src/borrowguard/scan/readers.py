"""Where log lines come from: files, globs, stdin, .gz, a growing file, a command's output.

Everything is read as bytes (logs are not guaranteed UTF-8) and in bounded pieces; the followers yield
text lines with invalid bytes replaced and every line capped like the scanner caps it.
"""

from __future__ import annotations

import codecs
import contextlib
import glob
import os
import queue
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from borrowguard.errors import UserInputError
from borrowguard.scan.normalize import ELLIPSIS_BYTES, HEAD, MAX_LINE, decode
from borrowguard.scan.sources import Opened, long_lines_note, open_stream, text_encoding

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
    UTF-16 and byte-order marks decoded; `not_a_log` says why a binary file is not read (see sources)."""
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


def follow_file(
    path: str | os.PathLike[str],
    stop: threading.Event,
    poll_interval: float = 0.2,
    *,
    from_end: bool = False,
    start_at: int | None = None,
    on_note: Callable[[str], None] | None = None,
) -> Iterator[str]:
    """Lines of `path` as it grows, until `stop` is set (then what is already written is still read).

    Survives rotation (the path now names a new file: the old one is read to its end, then the new one
    from its start) and truncation (copytruncate: reading restarts at the top). Waits for the file to
    appear. `from_end` skips what the file holds when following starts, like `tail -f`; `start_at` skips
    the first bytes instead (the size the caller saw when it decided to follow: nothing written after that
    moment is lost to a follower thread that opens the file a little later).

    A file that starts with a byte-order mark (UTF-16 as PowerShell writes it) is decoded. `on_note`
    hears what the operator should know about the input, each thing once (a decoded encoding, a line
    longer than the scanner's cap).
    """
    target = Path(path)
    said: set[str] = set()

    def note(key: str, message: str) -> None:
        if on_note is not None and key not in said:
            said.add(key)
            on_note(message)

    splitter = LineSplitter(on_long=lambda n: note("long", f"{target}: {long_lines_note(1, n)}"))
    fh: BinaryIO | None = None
    ident: tuple[int, int] | None = None
    recode: _Recode | None = None
    skip_existing = from_end or start_at is not None
    try:
        while True:
            if fh is None:
                fh, ident = _open_follow(target)
                if fh is not None and skip_existing:
                    if start_at is not None and start_at <= os.fstat(fh.fileno()).st_size:
                        fh.seek(start_at)
                    elif start_at is None:
                        fh.seek(0, os.SEEK_END)
                skip_existing = False  # a file that appears or replaces this one is read whole
                recode = None
            if fh is not None:
                got = False
                while True:
                    at = fh.tell()
                    data = fh.read(READ_SIZE)
                    if not data:
                        break
                    got = True
                    if recode is None:
                        recode = _Recode(fh)
                        if recode.codec:
                            note("codec", f"{target}: {recode.codec.upper()} text (decoded)")
                    data = recode(data, at)
                    for line in splitter.push(data):
                        yield decode(line)
                if got:
                    continue
                # At the end: has the path moved on (rotation) or been cut short (truncation)?
                try:
                    st = os.stat(target)
                    now = (st.st_dev, st.st_ino)
                except OSError:
                    now = None
                if now is not None and now != ident:
                    for line in splitter.flush():
                        yield decode(line)
                    fh.close()
                    fh, ident = None, None
                    continue
                if now is not None and st.st_size < fh.tell():
                    for line in splitter.flush():
                        yield decode(line)
                    fh.seek(0)
                    recode = None
                    continue
            if stop.is_set():
                for line in splitter.flush():
                    yield decode(line)
                return
            stop.wait(poll_interval)
    finally:
        if fh is not None:
            fh.close()


class _Recode:
    """A followed file's bytes as the scanner reads them: a byte-order mark at its start dropped, UTF-16
    (or UTF-32) decoded to UTF-8. Decided from the file's first bytes, wherever reading starts."""

    def __init__(self, fh: BinaryIO) -> None:
        try:
            first = os.pread(fh.fileno(), 64, 0)
        except (OSError, AttributeError):
            first = b""
        codec, self._bom = text_encoding(first)
        self.codec = codec if codec not in (None, "utf-8") else None
        self._decoder = codecs.getincrementaldecoder(self.codec)("replace") if self.codec else None

    def __call__(self, data: bytes, at: int) -> bytes:
        if at < self._bom:
            data = data[self._bom - at :]
        if self._decoder is not None:
            return self._decoder.decode(data).encode("utf-8", "replace")
        return data


def _open_follow(target: Path) -> tuple[BinaryIO | None, tuple[int, int] | None]:
    try:
        fh = target.open("rb")
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        raise UserInputError(f"cannot read {target}: {exc.strerror or exc}") from None
    st = os.fstat(fh.fileno())
    return fh, (st.st_dev, st.st_ino)


def follow_command(
    command: str | Sequence[str],
    stop: threading.Event,
    *,
    grace: float = 3.0,
    on_exit: Callable[[int | None], None] | None = None,
    on_note: Callable[[str], None] | None = None,
) -> Iterator[str]:
    """Lines a command writes (stdout and stderr: `docker logs` copies the container's stderr to its
    own) until it exits or `stop` is set; then it and its children are terminated (killed after `grace`
    seconds). The command runs without a shell: `"docker logs -f vllm"` is split like a shell would.

    `on_exit(returncode)` is called when the command ended by itself, before `stop` was set (a log
    source that fails or ends early is something to report, not a clean log). `on_note` hears, once,
    that a line was longer than the scanner's cap."""
    argv = command_argv(command)
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopping it stops what it started
        )
    except FileNotFoundError:
        raise UserInputError(f"command not found: {argv[0]}") from None
    except OSError as exc:
        raise UserInputError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
    assert proc.stdout is not None
    lines: queue.Queue[bytes | None] = queue.Queue(maxsize=10_000)

    def pump() -> None:
        splitter = LineSplitter(
            on_long=None if on_note is None else lambda n: on_note(long_lines_note(1, n))
        )
        try:
            while True:
                data = proc.stdout.read1(READ_SIZE)  # type: ignore[union-attr]
                if not data:
                    break
                for line in splitter.push(data):
                    lines.put(line)
            for line in splitter.flush():
                lines.put(line)
        except (OSError, ValueError):
            pass  # the pipe closed under us while stopping
        finally:
            lines.put(None)

    reader = threading.Thread(target=pump, name="borrowguard-follow-cmd", daemon=True)
    reader.start()
    try:
        while True:
            try:
                item = lines.get(timeout=0.1)
            except queue.Empty:
                if stop.is_set():
                    return
                continue
            if item is None:
                if on_exit is not None and not stop.is_set():
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(timeout=grace)
                    on_exit(proc.poll())
                return
            yield decode(item)
    finally:
        _terminate(proc, grace)
        # Unblock the pump if the queue is full, then let it see the closed pipe.
        with contextlib.suppress(queue.Empty):
            while True:
                lines.get_nowait()
        reader.join(timeout=grace)
        if proc.stdout is not None:
            proc.stdout.close()


def command_argv(command: str | Sequence[str]) -> list[str]:
    """The command split like a shell would (no shell runs it); UserInputError when it cannot run."""
    try:
        argv = shlex.split(command) if isinstance(command, str) else list(command)
    except ValueError as exc:
        raise UserInputError(f"cannot parse the command {command!r}: {exc}") from None
    if not argv:
        raise UserInputError('--follow-cmd needs a command, e.g. "docker logs -f vllm"')
    if shutil.which(argv[0]) is None:
        raise UserInputError(f"command not found: {argv[0]}")
    return argv


def _terminate(proc: subprocess.Popen[bytes], grace: float) -> None:
    if proc.poll() is not None:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return
            time.sleep(0.02)
    proc.wait(timeout=grace)
