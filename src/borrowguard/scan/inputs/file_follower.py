"""Following a file as it grows (`tail -F`): through rotation and truncation, decoding UTF-16."""

from __future__ import annotations

import codecs
import os
import threading
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import BinaryIO

from borrowguard.errors import UserInputError
from borrowguard.scan.inputs.kind import text_encoding
from borrowguard.scan.inputs.long_lines import long_lines_note
from borrowguard.scan.inputs.readers import READ_SIZE, LineSplitter
from borrowguard.scan.normalize import decode


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
    follower = _FileFollower(Path(path), on_note, from_end=from_end, start_at=start_at)
    try:
        while True:
            if follower.fh is None:
                follower.open()
            if follower.fh is not None:
                if (yield from follower.read_new()):
                    continue
                if (yield from follower.restart_if_replaced()):
                    continue
            if stop.is_set():
                yield from follower.flush()
                return
            stop.wait(poll_interval)
    finally:
        follower.close()


class _FileFollower:
    """What following one path keeps between polls: the file open now (None until the path exists),
    which file that is, how its bytes decode, the line split so far and what was already said.

    `read_new` and `restart_if_replaced` are generators of lines that return whether they did anything,
    for `follow_file` to `yield from`."""

    def __init__(
        self,
        target: Path,
        on_note: Callable[[str], None] | None,
        *,
        from_end: bool,
        start_at: int | None,
    ) -> None:
        self.target = target
        self.fh: BinaryIO | None = None
        self._ident: tuple[int, int] | None = None
        self._recode: _Recode | None = None
        self._on_note = on_note
        self._said: set[str] = set()
        self._start_at = start_at
        self._skip_existing = from_end or start_at is not None
        self._splitter = LineSplitter(
            on_long=lambda n: self._note("long", f"{target}: {long_lines_note(1, n)}")
        )

    def _note(self, key: str, message: str) -> None:
        if self._on_note is not None and key not in self._said:
            self._said.add(key)
            self._on_note(message)

    def open(self) -> None:
        """Open the path if it exists now. Only the first file opened skips what it holds (`from_end`,
        `start_at`): a file that appears or replaces it is read whole."""
        self.fh, self._ident = _open_follow(self.target)
        if self.fh is not None and self._skip_existing:
            if self._start_at is not None and self._start_at <= os.fstat(self.fh.fileno()).st_size:
                self.fh.seek(self._start_at)
            elif self._start_at is None:
                self.fh.seek(0, os.SEEK_END)
        self._skip_existing = False
        self._recode = None

    def read_new(self) -> Generator[str, None, bool]:
        """The lines written since the last read; returns whether anything was read."""
        assert self.fh is not None
        got = False
        while True:
            at = self.fh.tell()
            data = self.fh.read(READ_SIZE)
            if not data:
                return got
            got = True
            if self._recode is None:
                self._recode = _Recode(self.fh)
                if self._recode.codec:
                    self._note("codec", f"{self.target}: {self._recode.codec.upper()} text (decoded)")
            data = self._recode(data, at)
            for line in self._splitter.push(data):
                yield decode(line)

    def restart_if_replaced(self) -> Generator[str, None, bool]:
        """At the end of the file: has the path moved on (rotation: the old file is done, the new one is
        opened at the next poll) or been cut short (truncation: reading restarts at the top)? Either way
        the line in progress ends; returns whether reading restarts."""
        assert self.fh is not None
        try:
            st = os.stat(self.target)
            now = (st.st_dev, st.st_ino)
        except OSError:
            now = None
        if now is not None and now != self._ident:
            yield from self.flush()
            self.fh.close()
            self.fh, self._ident = None, None
            return True
        if now is not None and st.st_size < self.fh.tell():
            yield from self.flush()
            self.fh.seek(0)
            self._recode = None
            return True
        return False

    def flush(self) -> Iterator[str]:
        for line in self._splitter.flush():
            yield decode(line)

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()


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
