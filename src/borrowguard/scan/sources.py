"""What an input holds, told from its first bytes, and what happened while reading it.

A log reaches `scan` as a file, a rotated `.gz`, a pipe, a FIFO or `<(process substitution)`, sometimes
written by PowerShell (UTF-16 with a byte-order mark), sometimes by mistake not a log at all. Inputs are
read once, front to back, never seeking, so that pipes read like files; the first block decides:

* gzip (by its magic bytes, whatever the name): decompressed as far as it goes. A cut or corrupt file
  gives every line before the damage, and the damage is reported (the scan is then not a clean bill);
* a byte-order mark (UTF-16 LE/BE, UTF-32, UTF-8) or UTF-16 without one: decoded to UTF-8;
* binary data (NUL bytes or mostly non-text) and other compressions (xz, bzip2, zstd, zip): not scanned,
  said so;
* anything else: bytes as they are (the scanner decodes UTF-8 leniently).

Lines longer than the scanner's cap (64 KiB) keep only their ends; that is counted and said once.
`InputReport` collects what the operator must hear about the input itself: warnings (the input is
incomplete: exit 1 at least), failures (a log source failed: exit 2) and notes.
"""

from __future__ import annotations

import codecs
import re
import threading
import zlib
from dataclasses import dataclass, field
from typing import Any, Protocol

from borrowguard._text import printable
from borrowguard.scan.model import ScanResult
from borrowguard.scan.normalize import HEAD, MAX_LINE

GZIP_MAGIC = b"\x1f\x8b"
SNIFF = 64 * 1024
"""How much of an input's start decides what it is."""
READ_SIZE = 1 << 16
MAX_MESSAGES = 20
MAX_MESSAGE = 400

_BOMS = (  # longest first: UTF-32 LE starts like UTF-16 LE
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_OTHER_COMPRESSION = (
    (b"\xfd7zXZ\x00", "xz-compressed", "xz -dc"),
    (b"BZh", "bzip2-compressed", "bzip2 -dc"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed", "zstd -dc"),
    (b"PK\x03\x04", "a zip archive", "unzip -p"),
)
_HOLE = re.compile(b"\x00{16,}")
"""A run of NUL bytes is a hole (a log cut by copytruncate while its writer kept its offset, a crash), not
evidence of a binary file; NULs scattered among other bytes are."""
_NON_TEXT = bytes(c for c in range(1, 32) if c not in b"\t\n\v\f\r\x1b\b") + b"\x7f"


class Readable(Protocol):
    def read1(self, size: int = ..., /) -> bytes: ...


def kib(n: int) -> str:
    return f"{n // 1024} KiB"


# ---- what the first bytes say ---------------------------------------------------------------------


def text_encoding(head: bytes) -> tuple[str | None, int]:
    """(codec, length of its byte-order mark) for a text that is not plain UTF-8 / ASCII, else (None, 0).
    UTF-8 with a BOM gives ("utf-8", 3): the mark is dropped, the bytes stay as they are."""
    for bom, codec in _BOMS:
        if head.startswith(bom):
            return codec, len(bom)
    sample = head[:4096]
    if len(sample) >= 16:
        even, odd = sample[0::2], sample[1::2]
        # ASCII as UTF-16 without a mark: every other byte is NUL (`Out-File -NoBOM`, some tools).
        if odd.count(0) >= 0.9 * len(odd) and even.count(0) <= 0.1 * len(even):
            return "utf-16-le", 0
        if even.count(0) >= 0.9 * len(even) and odd.count(0) <= 0.1 * len(odd):
            return "utf-16-be", 0
    return None, 0


def not_text(head: bytes) -> str | None:
    """Why `head` (the start of an input, already decompressed) is not a log, or None when it is text."""
    for magic, what, command in _OTHER_COMPRESSION:
        if head.startswith(magic):
            return f"it is {what}; decompress it first, e.g. `{command} FILE | borrowguard scan -`"
    body = _HOLE.sub(b"", head)
    if not body:
        return None  # empty, or nothing but a hole so far: read it as text
    if b"\x00" in body:
        return "it looks binary (NUL bytes in its first block), not like a log"
    controls = len(body) - len(body.translate(None, _NON_TEXT))
    text = body.decode("utf-8", "replace")
    invalid = text.count("\ufffd") - body.count("\ufffd".encode())
    if controls + invalid > 0.3 * len(body):
        return "it looks binary (mostly non-text bytes in its first block), not like a log"
    return None


# ---- streams: each returns at least one byte from read1 unless at its end ---------------------------


class _Base:
    def read1(self, size: int = READ_SIZE, /) -> bytes:
        raise NotImplementedError

    def read(self, size: int = -1, /) -> bytes:
        """Up to `size` bytes (all when negative); fewer only at the end."""
        parts: list[bytes] = []
        got = 0
        while size < 0 or got < size:
            chunk = self.read1(READ_SIZE if size < 0 else size - got)
            if not chunk:
                break
            parts.append(chunk)
            got += len(chunk)
        return b"".join(parts)


class _Raw(_Base):
    """A file object read without seeking: `read1` where it has one (pipes give what is there)."""

    def __init__(self, fileobj: Any) -> None:
        self._read1 = getattr(fileobj, "read1", None) or fileobj.read

    def read1(self, size: int = READ_SIZE, /) -> bytes:
        return bytes(self._read1(max(size, 1)))


class _Prefixed(_Base):
    """`head` (already read, to look at) and then the rest of `src`."""

    def __init__(self, head: bytes, src: Readable) -> None:
        self._head = memoryview(head)
        self._src = src

    def read1(self, size: int = READ_SIZE, /) -> bytes:
        if self._head:
            size = max(size, 1)
            out, self._head = bytes(self._head[:size]), self._head[size:]
            return out
        return self._src.read1(size)


class Gunzip(_Base):
    """gzip members decompressed one after another, tolerant of damage: what decompresses is returned,
    then `damage` says what went wrong (zcat would print the same lines and an error)."""

    def __init__(self, src: Readable) -> None:
        self._src = src
        self._d = zlib.decompressobj(wbits=31)
        self._in = b""
        self._done = False
        self._member_bytes = 0
        self.damage: str | None = None
        self.trailing = False
        """Bytes after the last member that are neither a member nor padding (zcat: "trailing garbage")."""

    def _pull(self) -> bool:
        data = self._src.read1(READ_SIZE)
        if data:
            self._in += data
            return True
        return False

    def read1(self, size: int = READ_SIZE, /) -> bytes:
        size = max(size, 1)
        while not self._done:
            if not self._in and not self._pull():
                if self._member_bytes:
                    self.damage = "it ends in the middle of the compressed data (a cut or partly copied file)"
                self._done = True
                break
            try:
                out = self._d.decompress(self._in, size)
            except zlib.error as exc:
                self.damage = f"the compressed data is corrupt ({exc})"
                self._done = True
                break
            self._member_bytes += len(self._in) - len(self._d.unconsumed_tail)
            if not self._d.eof:
                self._in = self._d.unconsumed_tail
                if out:
                    return out
                continue
            # One member ended: another may follow (`cat a.gz b.gz`), or padding, or garbage.
            self._in = self._d.unused_data
            self._member_bytes = 0
            while len(self._in) < 2 and self._pull():
                pass
            if self._in.startswith(GZIP_MAGIC):
                self._d = zlib.decompressobj(wbits=31)
            elif self._in:
                while self._pull():
                    if len(self._in) > SNIFF:
                        break
                self.trailing = bool(self._in.strip(b"\x00"))
                self._in = b""
                self._done = True
            else:
                self._done = True
            if out:
                return out
        return b""


class _Transcode(_Base):
    """Text in another encoding, as UTF-8 (what the scanner reads); undecodable bytes become U+FFFD."""

    def __init__(self, src: Readable, codec: str) -> None:
        self._src = src
        self._decoder = codecs.getincrementaldecoder(codec)("replace")
        self._done = False

    def read1(self, size: int = READ_SIZE, /) -> bytes:
        while not self._done:
            data = self._src.read1(max(size, 4))
            text = self._decoder.decode(data, final=not data)
            self._done = not data
            if text:
                return text.encode("utf-8", "replace")
        return b""


class LongLines:
    """Counts lines and notices those longer than MAX_LINE (the scanner keeps only their ends)."""

    def __init__(self) -> None:
        self.lines = 0
        self.long = 0
        self.first_long: int | None = None
        self._run = 0  # length of the line not yet ended
        self._counted = False  # that line is already counted as long

    def _long(self, line_no: int) -> None:
        self.long += 1
        if self.first_long is None:
            self.first_long = line_no

    def see(self, data: bytes) -> None:
        if not data:
            return
        first = data.find(b"\n")
        if first == -1:
            self._run += len(data)
            if self._run > MAX_LINE and not self._counted:
                self._long(self.lines + 1)
                self._counted = True
            return
        if self._run + first > MAX_LINE and not self._counted:
            self._long(self.lines + 1)
        # The lines after the first: a window of MAX_LINE + 1 bytes from a line's start holds its newline
        # unless that line is too long; jumping to the window's last newline costs one pass at memchr speed.
        pos, end, counted = first + 1, len(data), False
        while pos + MAX_LINE + 1 <= end:
            nl = data.rfind(b"\n", pos, pos + MAX_LINE + 1)
            if nl == -1:
                self._long(self.lines + data.count(b"\n", 0, pos) + 1)
                nl = data.find(b"\n", pos + MAX_LINE + 1)
                if nl == -1:
                    counted = True
                    break
            pos = nl + 1
        last = data.rfind(b"\n")
        self._run = end - last - 1
        self._counted = counted
        self.lines += data.count(b"\n")

    @property
    def seen(self) -> int:
        """Lines so far, the last one counted even without its newline."""
        return self.lines + (1 if self._run else 0)

    def note(self) -> str | None:
        return long_lines_note(self.long, self.first_long) if self.long and self.first_long else None


def long_lines_note(count: int, first: int) -> str:
    """What to say, once, about lines the scanner keeps only the ends of."""
    many = f"{count:,} lines are" if count > 1 else "a line is"
    where = f"the first is line {first:,}" if count > 1 else f"line {first:,}"
    return (
        f"{many} longer than {kib(MAX_LINE)} ({where}): only the first and last {kib(HEAD)} of such a "
        "line are scanned (the middle of a huge line is a prompt or an image, not a failure signature)"
    )


class _Watched(_Base):
    def __init__(self, src: Readable, lines: LongLines) -> None:
        self._src = src
        self._lines = lines

    def read1(self, size: int = READ_SIZE, /) -> bytes:
        data = self._src.read1(size)
        self._lines.see(data)
        return data


@dataclass
class Opened(_Base):
    """An input made readable: `read`/`read1` give its text as bytes (UTF-8 or as it was); after reading,
    `problems()` (the input is incomplete) and `notes()` say what the reader met."""

    name: str
    stream: Readable
    not_a_log: str | None = None
    """Why it is not scanned (binary, another compression); then `read` gives nothing."""
    compression: str | None = None
    encoding: str | None = None
    gzip: Gunzip | None = None
    lines: LongLines = field(default_factory=LongLines)

    def read1(self, size: int = READ_SIZE, /) -> bytes:
        return b"" if self.not_a_log else self.stream.read1(size)

    def problems(self) -> list[str]:
        if self.gzip is not None and self.gzip.damage:
            return [
                f"{self.name}: compressed data is damaged or truncated: {self.gzip.damage}; "
                f"scanned the {self.lines.seen:,} lines before the damage"
            ]
        return []

    def notes(self) -> list[str]:
        notes = []
        if self.encoding:
            notes.append(f"{self.name}: {self.encoding.upper()} text (decoded)")
        if self.gzip is not None and self.gzip.trailing:
            notes.append(f"{self.name}: data after the end of the compressed stream was ignored (as zcat does)")
        long_lines = self.lines.note()
        if long_lines:
            notes.append(f"{self.name}: {long_lines}")
        return notes


class _Skip(_Base):
    """`src` without its first `n` bytes (a byte-order mark)."""

    def __init__(self, src: Readable, n: int) -> None:
        self._src = src
        self._n = n

    def read1(self, size: int = READ_SIZE, /) -> bytes:
        while self._n:
            data = self._src.read1(max(size, self._n))
            if not data:
                return b""
            cut = min(self._n, len(data))
            self._n -= cut
            if data[cut:]:
                return data[cut:]
        return self._src.read1(size)


def open_stream(fileobj: Any, name: str, *, live: bool = False) -> Opened:
    """`fileobj` (a binary file, pipe or stdin, read from its current position, never seeked) made
    readable as log text. `live`: a stream still being written; look at the first chunk that arrives
    instead of waiting for a whole block."""
    src: Readable = _Raw(fileobj)
    head = _head(src, live)
    src = _Prefixed(head, src)
    gz = None
    if head.startswith(GZIP_MAGIC):
        gz = Gunzip(src)
        head = _head(gz, live)
        src = _Prefixed(head, gz)
    codec, bom = text_encoding(head)
    if bom:
        src = _Skip(src, bom)
    why = None
    if codec is not None and codec != "utf-8":
        src = _Transcode(src, codec)
    elif codec is None:
        why = not_text(head)
    lines = LongLines()
    return Opened(
        name,
        _Watched(src, lines),
        not_a_log=why,
        compression="gzip" if gz is not None else None,
        encoding=codec if codec not in (None, "utf-8") else None,
        gzip=gz,
        lines=lines,
    )


def _head(src: Readable, live: bool) -> bytes:
    if live:
        return src.read1(SNIFF)
    parts: list[bytes] = []
    got = 0
    while got < SNIFF:
        chunk = src.read1(SNIFF - got)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


# ---- what to tell the operator about the input -----------------------------------------------------


@dataclass
class InputReport:
    """Said about the inputs themselves, from any reading thread: warnings make the scan incomplete (exit 1
    at least), a failure means a log source failed (exit 2), notes change nothing."""

    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    failed: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def warn(self, message: str) -> None:
        self._add(self.warnings, message)

    def fail(self, message: str) -> None:
        with self._lock:
            self.failed = True
        self._add(self.warnings, message)

    def note(self, message: str) -> None:
        self._add(self.notes, message)

    def read(self, opened: Opened) -> None:
        """What reading `opened` to its end revealed."""
        for message in opened.problems():
            self.warn(message)
        for message in opened.notes():
            self.note(message)

    def _add(self, target: list[str], message: str) -> None:
        message = printable(" ".join(message.split()))
        if len(message) > MAX_MESSAGE:
            message = message[: MAX_MESSAGE - 1] + "…"
        with self._lock:
            if message not in target and len(target) < MAX_MESSAGES:
                target.append(message)

    def apply(self, result: ScanResult) -> ScanResult:
        """`result` with these warnings, notes and failure added."""
        with self._lock:
            result.warnings.extend(m for m in self.warnings if m not in result.warnings)
            result.notes.extend(m for m in self.notes if m not in result.notes)
            result.input_failed = result.input_failed or self.failed
        return result

