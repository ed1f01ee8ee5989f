"""An incremental, bounded parser for the `data:` lines of an OpenAI-style server-sent-event stream.

Bytes arrive in arbitrary chunks (a line can be split anywhere, even inside a UTF-8 sequence); a hostile
or broken server may send a line without end. The buffer is bounded so such a stream costs at most
`max_line` bytes before it is reported as broken.
"""

from __future__ import annotations


class SSEError(ValueError):
    """The stream cannot be an SSE stream (a line over the limit)."""


class SSEParser:
    """Feed bytes, get the payloads of `data:` fields, one per line (what OpenAI servers send)."""

    __slots__ = ("_buffer", "max_line")

    def __init__(self, max_line: int = 1 << 20) -> None:
        self._buffer = bytearray()
        self.max_line = max_line

    def feed(self, chunk: bytes) -> list[str]:
        self._buffer += chunk
        if b"\n" not in chunk and b"\r" not in chunk:
            if len(self._buffer) > self.max_line:
                raise SSEError(f"an SSE line exceeded {self.max_line} bytes")
            return []
        lines = self._buffer.splitlines(keepends=True)
        rest = lines.pop() if lines and not lines[-1].endswith((b"\n", b"\r")) else b""
        # A lone "\r" at a chunk end may be the first half of "\r\n": splitting there is still correct,
        # the "\n" then makes an empty line, which carries no data.
        self._buffer = bytearray(rest)
        if len(self._buffer) > self.max_line:
            raise SSEError(f"an SSE line exceeded {self.max_line} bytes")
        out = []
        for line in lines:
            payload = _data(line)
            if payload is not None:
                out.append(payload)
        return out

    def close(self) -> list[str]:
        """The payload of a last line that came without a newline (servers do that)."""
        line, self._buffer = bytes(self._buffer), bytearray()
        payload = _data(line)
        return [] if payload is None else [payload]


def _data(line: bytes) -> str | None:
    line = line.rstrip(b"\r\n")
    if not line.startswith(b"data:"):
        return None  # blank separators, comments (":ping"), event:/id:/retry: fields
    value = line[5:]
    if value.startswith(b" "):
        value = value[1:]
    return value.decode("utf-8", errors="replace")
