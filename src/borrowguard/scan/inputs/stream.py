"""An input made readable as log text, its first bytes deciding how.

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
What the reader met is told by `Opened.problems()` and `Opened.notes()`, for a
borrowguard.scan.inputs.report.InputReport to collect.

Modules below this one: kind (what the first bytes say), byte_streams (the stacked readers),
long_lines (counting lines over the cap).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from borrowguard.scan.inputs.byte_streams import (
    READ_SIZE,
    ByteStream,
    Gunzip,
    Prefixed,
    RawStream,
    Readable,
    SkipBytes,
    Transcode,
)
from borrowguard.scan.inputs.kind import GZIP_MAGIC, SNIFF, not_text, text_encoding
from borrowguard.scan.inputs.long_lines import LongLines


class _Watched(ByteStream):
    """`src`, every byte read also shown to `lines` (which counts the long ones)."""

    def __init__(self, src: Readable, lines: LongLines) -> None:
        self._src = src
        self._lines = lines

    def read1(self, size: int = READ_SIZE, /) -> bytes:
        data = self._src.read1(size)
        self._lines.see(data)
        return data


@dataclass
class Opened(ByteStream):
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


def open_stream(fileobj: Any, name: str, *, live: bool = False) -> Opened:
    """`fileobj` (a binary file, pipe or stdin, read from its current position, never seeked) made
    readable as log text. `live`: a stream still being written; look at the first chunk that arrives
    instead of waiting for a whole block."""
    src: Readable = RawStream(fileobj)
    head = _head(src, live)
    src = Prefixed(head, src)
    gz = None
    if head.startswith(GZIP_MAGIC):
        gz = Gunzip(src)
        head = _head(gz, live)
        src = Prefixed(head, gz)
    codec, bom = text_encoding(head)
    if bom:
        src = SkipBytes(src, bom)
    why = None
    if codec is not None and codec != "utf-8":
        src = Transcode(src, codec)
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
