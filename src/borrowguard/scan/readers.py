"""Where log lines come from: files, globs, stdin, .gz, a growing file, a command's output.

Everything is read as bytes (logs are not guaranteed UTF-8) and in bounded pieces; the followers yield
text lines with invalid bytes replaced and every line capped like the scanner caps it.
"""

from __future__ import annotations

import contextlib
import glob
import gzip
import os
import queue
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from borrowguard.errors import UserInputError
from borrowguard.scan.normalize import ELLIPSIS_BYTES, HEAD, MAX_LINE, decode

STDIN = "-"
GZIP_MAGIC = b"\x1f\x8b"
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
def open_input(inp: Input) -> Iterator[BinaryIO]:
    """A binary stream of the input's log text: gzip (by magic bytes, whatever the name) decompressed."""
    if inp.path is None:
        yield sys.stdin.buffer
        return
    try:
        raw = inp.path.open("rb")
    except OSError as exc:
        raise UserInputError(f"cannot read {inp.name}: {exc.strerror or exc}") from None
    with raw:
        if raw.read(2) == GZIP_MAGIC:
            raw.seek(0)
            with gzip.GzipFile(fileobj=raw) as gz:
                yield gz  # type: ignore[misc]
        else:
            raw.seek(0)
            yield raw


class LineSplitter:
    """Bytes in, capped lines out: a line longer than MAX_LINE keeps its ends (as the scanner would)."""

    def __init__(self) -> None:
        self._pending = b""
        self._head: bytes | None = None

    def push(self, data: bytes) -> list[bytes]:
        lines: list[bytes] = []
        data = self._pending + data
        start = 0
        while True:
            nl = data.find(b"\n", start)
            if nl == -1:
                break
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
        if self._head is not None:
            line, self._head = self._head + ELLIPSIS_BYTES + line[-HEAD:], None
        return line


def follow_file(
    path: str | os.PathLike[str],
    stop: threading.Event,
    poll_interval: float = 0.2,
    *,
    from_end: bool = False,
) -> Iterator[str]:
    """Lines of `path` as it grows, until `stop` is set (then what is already written is still read).

    Survives rotation (the path now names a new file: the old one is read to its end, then the new one
    from its start) and truncation (copytruncate: reading restarts at the top). Waits for the file to
    appear. `from_end` skips what the file holds when following starts, like `tail -f`.
    """
    target = Path(path)
    splitter = LineSplitter()
    fh: BinaryIO | None = None
    ident: tuple[int, int] | None = None
    skip_existing = from_end
    try:
        while True:
            if fh is None:
                fh, ident = _open_follow(target)
                if fh is not None and skip_existing:
                    fh.seek(0, os.SEEK_END)
                skip_existing = False  # a file that appears or replaces this one is read whole
            if fh is not None:
                got = False
                while True:
                    data = fh.read(READ_SIZE)
                    if not data:
                        break
                    got = True
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
                    continue
            if stop.is_set():
                for line in splitter.flush():
                    yield decode(line)
                return
            stop.wait(poll_interval)
    finally:
        if fh is not None:
            fh.close()


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
    command: str | Sequence[str], stop: threading.Event, *, grace: float = 3.0
) -> Iterator[str]:
    """Lines a command writes (stdout and stderr: `docker logs` copies the container's stderr to its
    own) until it exits or `stop` is set; then it and its children are terminated (killed after `grace`
    seconds). The command runs without a shell: `"docker logs -f vllm"` is split like a shell would."""
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
        splitter = LineSplitter()
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
