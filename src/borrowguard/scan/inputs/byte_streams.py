"""Byte streams stacked on an input, read front to back and never seeked, so that pipes read like files:
the raw file, its already-looked-at head put back, gzip decompressed, a byte-order mark skipped, another
encoding transcoded to UTF-8. Each returns at least one byte from `read1` unless at its end.
"""

from __future__ import annotations

import codecs
import zlib
from typing import Any, Protocol

from borrowguard.scan.inputs.kind import GZIP_MAGIC, SNIFF

READ_SIZE = 1 << 16


class Readable(Protocol):
    def read1(self, size: int = ..., /) -> bytes: ...


class ByteStream:
    """What every stream here offers: `read1` (what is there, at least one byte unless at the end) and
    `read` built on it."""

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


class RawStream(ByteStream):
    """A file object read without seeking: `read1` where it has one (pipes give what is there)."""

    def __init__(self, fileobj: Any) -> None:
        self._read1 = getattr(fileobj, "read1", None) or fileobj.read

    def read1(self, size: int = READ_SIZE, /) -> bytes:
        return bytes(self._read1(max(size, 1)))


class Prefixed(ByteStream):
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


class Gunzip(ByteStream):
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


class Transcode(ByteStream):
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


class SkipBytes(ByteStream):
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
