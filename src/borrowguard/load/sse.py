"""An incremental, bounded parser for server-sent events, as the WHATWG HTML standard defines them.

https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation:
- the stream is UTF-8 (undecodable bytes become U+FFFD), one leading BOM is dropped;
- lines end with CRLF, LF or CR, and any of them may be split across chunks;
- a line starting with ":" is a comment; otherwise the field name runs to the first ":", and one space
  after it is dropped from the value; a line without ":" is a field with an empty value;
- `data` lines append their value and "\n" to the event's data, `event` sets its type, `id` (without
  NUL) sets the last event id, `retry` (digits only) the reconnection time; other fields are ignored;
- a blank line dispatches the event: with no data nothing is dispatched, else the data loses its last
  "\n" — so an event with two `data:` lines carries both joined by "\n";
- at the end of the stream an event not yet ended by a blank line is discarded.

A hostile or broken server may send a line, or an event, without end: the bytes held for one event
(its data lines and the line not yet ended) are bounded by `max_event`, after which SSEError is raised.
"""

from __future__ import annotations

import re
from typing import NamedTuple

_BOM = b"\xef\xbb\xbf"
_LINE_END = re.compile(rb"\r\n|\r|\n")


class SSEError(ValueError):
    """The stream cannot be an SSE stream (an event over the size limit)."""


class ServerSentEvent(NamedTuple):  # a tuple: cheap to make, one per streamed chunk
    data: str
    event: str = "message"
    id: str = ""  # the last event id when this event was dispatched, as EventSource reports it


class SSEParser:
    """Feed bytes as they arrive, get the events they complete."""

    __slots__ = ("_buffer", "_data", "_event", "_held", "_skip_lf", "_started", "last_event_id", "max_event",
                 "retry")

    def __init__(self, max_event: int = 1 << 20) -> None:
        self.max_event = max_event
        self.last_event_id = ""
        self.retry: int | None = None  # the server's reconnection time in ms, if it sent one
        self._buffer = bytearray()  # bytes of the line not yet ended
        self._data: list[str] = []  # the pending event's data lines
        self._event = ""
        self._held = 0  # bytes of the pending event's data lines, for the bound
        self._skip_lf = False  # the last chunk ended in CR: an LF first in the next one is its CRLF
        self._started = False  # the BOM check is done

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        buffer = self._buffer
        buffer += chunk
        if not self._started:
            if len(buffer) < len(_BOM) and _BOM.startswith(bytes(buffer)):
                return []  # could still be a BOM: wait for more
            if buffer.startswith(_BOM):
                del buffer[: len(_BOM)]
            self._started = True
        if self._skip_lf and buffer:
            if buffer[0] == 0x0A:
                del buffer[0]
            self._skip_lf = False
        if b"\n" not in chunk and b"\r" not in chunk:
            # No line ends here (what is held never has one): append only, so that a line dripped in
            # small chunks costs linear time, not a copy of the whole buffer per chunk.
            self._check_bound()
            return []
        events: list[ServerSentEvent] = []
        data = bytes(buffer)
        # The last piece is the line not yet ended. Most streams use LF alone: split on it without the regex.
        lines = data.split(b"\n") if b"\r" not in data else _LINE_END.split(data)
        rest = lines.pop()
        if not rest and data.endswith(b"\r"):
            self._skip_lf = True  # a CR at the end may be half of a CRLF split between chunks
        for line in lines:
            event = self._line(line)
            if event is not None:
                events.append(event)
        self._buffer = bytearray(rest)
        self._check_bound()
        return events

    def _check_bound(self) -> None:
        if self._held + len(self._buffer) > self.max_event:
            raise SSEError(f"an SSE event exceeded {self.max_event} bytes")

    def close(self) -> bool:
        """End of stream: drop what is pending. True when that was an unfinished event (the spec discards
        it: a server must end every event with a blank line)."""
        unfinished = bool(self._buffer.strip(b"\r\n") or self._data or self._event)
        self._buffer = bytearray()
        self._data, self._event, self._held = [], "", 0
        return unfinished

    def _line(self, raw: bytes) -> ServerSentEvent | None:
        if not raw:
            return self._dispatch()
        if raw.startswith(b":"):
            return None  # a comment (servers send them to keep the connection alive)
        # ':' is ASCII, so splitting before decoding cannot cut a UTF-8 sequence.
        name, colon, value = raw.partition(b":")
        if colon and value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            # Only data accumulates over lines; the other fields are replaced, so bounded by the line limit.
            self._held += len(value) + 1
            if self._held > self.max_event:
                raise SSEError(f"an SSE event exceeded {self.max_event} bytes")
            self._data.append(value.decode("utf-8", errors="replace"))
        elif name == b"event":
            self._event = value.decode("utf-8", errors="replace")
        elif name == b"id" and b"\0" not in value:  # an id with NUL is ignored
            self.last_event_id = value.decode("utf-8", errors="replace")
        # bytes.isdigit: ASCII digits only, as the spec asks. Beyond 15 digits (30,000 years) a value means
        # nothing, and int() of a huge one is slow or refused: ignore it.
        elif name == b"retry" and value.isdigit() and len(value) <= 15:
            self.retry = int(value)
        return None

    def _dispatch(self) -> ServerSentEvent | None:
        data, event = self._data, self._event
        self._data, self._event, self._held = [], "", 0
        if not data:
            return None
        return ServerSentEvent("\n".join(data), event or "message", self.last_event_id)
